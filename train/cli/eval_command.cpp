#include "train/cli/eval_command.h"

#include <cstdio>
#include <iostream>
#include <set>
#include <nlohmann/json.hpp>

#include "autograd/error.h"
#include "train/cli/checkpoint_outputs.h"
#include "train/cli/number_flags.h"
#include "train/cli/train_command.h"
#include "train/report/confusion.h"
#include "train/data/tsv.h"

namespace tapegrad::cli {

using nlohmann::json;

void add_eval(CLI::App& app, EvalFlags& f) {
  auto* cmd = app.add_subcommand("eval", "Loss, accuracy and confusion matrix of a checkpoint on a task or a TSV file");
  add_path_option(cmd, "--checkpoint", f.checkpoint, "Checkpoint directory (a run directory or its best/)")->required();
  std::string task_help = "Task whose validation set to score (a registered one):";
  for (const TaskEntry& entry : task_registry().entries()) task_help += cat("\n  ", entry.name, ": ", entry.help);
  auto* task = cmd->add_option("--task", f.task, task_help);
  auto* data = add_path_option(cmd, "--data", f.data, "A TSV file of label<TAB>text lines");
  task->excludes(data);
  auto* symbols = add_integer_option(cmd, "--symbols", f.task_options.symbols, "Task vocabulary size (default: as trained)");
  auto* min_len = add_integer_option(cmd, "--min-len", f.task_options.min_len, "Shortest generated sequence (default: as trained)");
  auto* max_len = add_integer_option(cmd, "--max-len", f.task_options.max_len, "Longest generated sequence (default: as trained)");
  auto* seed = add_integer_option(cmd, "--seed", f.seed, "Seed of the task's validation stream (default: as trained)");
  auto* valid_size =
      add_integer_option(cmd, "--valid-size", f.valid_size, "Examples of the task's validation set (default: as trained)");
  cmd->add_flag("--json", f.json, "Print the results as one JSON object");
  cmd->callback([&f, symbols, min_len, max_len, seed, valid_size] {
    if (f.task.empty() && f.data.empty()) throw ValueError("eval: give --task or --data");
    if (!f.data.empty())
      for (const CLI::Option* option : {symbols, min_len, max_len, seed, valid_size})
        if (option->count() > 0) throw ValueError(cat(option->get_name(), " configures a built-in task, which --data replaces"));
    LoadedModel loaded = load_model_for_outputs(f.checkpoint);
    std::vector<Example> examples;
    if (!f.data.empty()) {
      examples = read_tsv(f.data).examples;
    } else {
      TaskOptions task = f.task_options;
      uint64_t task_seed = f.seed;
      if (auto saved = saved_options(f.checkpoint)) {  // defaults: the task as it was trained
        if (!symbols->count()) task.symbols = saved->task.symbols;
        if (!min_len->count()) task.min_len = saved->task.min_len;
        if (!max_len->count()) task.max_len = saved->task.max_len;
        if (!seed->count()) task_seed = saved->seed;
        if (!valid_size->count()) f.valid_size = saved->valid_size;
      }
      task.name = f.task;
      // The task's settings and the memory of its examples, checked as train checks them, by flag, before
      // any example is generated (the model is the checkpoint's, already loaded).
      TrainOptions as_trained;
      as_trained.task = task;
      as_trained.valid_size = f.valid_size;
      as_trained.init = as_trained.out = f.checkpoint;
      validate(as_trained, flag_for);
      examples = validation_set(task, task_seed, f.valid_size);
    }
    const std::set<std::string> known(loaded.labels.begin(), loaded.labels.end());
    for (const Example& e : examples)
      if (!known.count(e.label))
        throw ValueError(cat("eval: label '", e.label, "' is not one of the checkpoint's ", loaded.labels.size(), " labels"));
    Evaluation result;
    try {
      result = evaluate(*loaded.model, examples, loaded.vocab, loaded.labels, evaluation_tokens_for(f.checkpoint, loaded));
    } catch (const NonFiniteOutput& e) {
      refuse_non_finite(e, f.checkpoint, loaded, "example");
    }
    if (result.truncated > 0)
      std::fprintf(stderr, "note: %lld of the %lld texts were cut to the context length %lld\n",
                   static_cast<long long>(result.truncated), static_cast<long long>(result.count),
                   static_cast<long long>(loaded.options.context_length));
    if (f.json) {
      // "confusion_cells" lists every nonzero [true, predicted, count]; the dense K x K "confusion" is
      // there too for up to kConfusionDenseClasses classes (confusion.h).
      json cells = json::array();
      for (const auto& [cell, n] : result.confusion.cells()) cells.push_back({cell.first, cell.second, n});
      json out{{"examples", result.count}, {"loss", result.loss}, {"accuracy", result.accuracy},
               {"labels", loaded.labels}, {"confusion_cells", cells}, {"truncated", result.truncated}};
      if (result.confusion.classes() <= kConfusionDenseClasses) out["confusion"] = result.confusion.dense();
      std::cout << out.dump() << std::endl;
      return;
    }
    std::printf("examples %lld  loss %.4f  accuracy %.2f%%  truncated %lld\n", static_cast<long long>(result.count),
                result.loss, 100 * result.accuracy, static_cast<long long>(result.truncated));
    std::fputs(confusion_text(result.confusion, loaded.labels).c_str(), stdout);
  });
}

}  // namespace tapegrad::cli
