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
#include "train/io/read_file.h"
#include "train/next_token_model.h"

namespace tapegrad::cli {

using nlohmann::json;

namespace {

/// eval of a language model's checkpoint: the loss of every token of --data's text (evaluate_text).
void evaluate_language_model(const EvalFlags& f) {
  LoadedLanguageModel loaded = load_language_model(f.checkpoint);
  const int64_t context = loaded.options.context_length;
  const std::string text = read_whole_file(f.data, kTextLimit);
  check_corpus_text(text, f.data);
  NextTokenModel model(std::move(loaded.model));
  TextEvaluation result;
  try {
    result = evaluate_text(model, loaded.tokenizer, text, evaluation_tokens_for(f.checkpoint, context), f.data);
  } catch (const NonFiniteOutput& e) {
    std::string what = e.what();
    if (what.starts_with("evaluate: ")) what.erase(0, 10);
    throw ValueError(cat(f.checkpoint, ": ", what));
  }
  const Evaluation& e = result.evaluation;
  if (f.json) {
    std::cout << json{{"tokens", result.tokens},          {"predicted", e.count},
                      {"characters", result.characters},  {"unknown_tokens", result.unknown},
                      {"loss", e.loss},                   {"perplexity", result.perplexity},
                      {"bits_per_character", result.bits_per_character}, {"accuracy", e.accuracy},
                      {"context_length", context}}
                     .dump()
              << std::endl;
    return;
  }
  std::printf("tokens %lld  loss %.4f  perplexity %.3f  bits per character %.4f  next-token accuracy %.2f%%\n",
              static_cast<long long>(result.tokens), e.loss, result.perplexity, result.bits_per_character,
              100 * e.accuracy);
  std::printf("(%lld tokens predicted in windows of %lld: each from the tokens before it in its window, 0 to %lld)\n",
              static_cast<long long>(e.count), static_cast<long long>(context), static_cast<long long>(context - 1));
  if (result.unknown > 0)
    std::fprintf(stderr, "note: %lld tokens of %s are not in the checkpoint's tokenizer (<unk>)\n",
                 static_cast<long long>(result.unknown), f.data.c_str());
}

}  // namespace

void add_eval(CLI::App& app, EvalFlags& f) {
  auto* cmd = app.add_subcommand("eval", "Loss, accuracy and confusion matrix of a checkpoint on a task or a TSV file; "
                                          "a language model's loss, perplexity and bits per character on a text file");
  add_path_option(cmd, "--checkpoint", f.checkpoint, "Checkpoint directory (a run directory or its best/)")->required();
  std::string task_help = "Task whose validation set to score (a registered one):";
  for (const TaskEntry& entry : task_registry().entries()) task_help += cat("\n  ", entry.name, ": ", entry.help);
  auto* task = cmd->add_option("--task", f.task, task_help);
  auto* data = add_path_option(cmd, "--data", f.data, "A TSV file of label<TAB>text lines (a language model: a text file)");
  task->excludes(data);
  auto* symbols = add_integer_option(cmd, "--symbols", f.task_options.symbols, "Task vocabulary size (default: as trained)");
  auto* min_len = add_integer_option(cmd, "--min-len", f.task_options.min_len, "Shortest generated sequence (default: as trained)");
  auto* max_len = add_integer_option(cmd, "--max-len", f.task_options.max_len, "Longest generated sequence (default: as trained)");
  auto* seed = add_integer_option(cmd, "--seed", f.seed, "Seed of the task's validation stream (default: as trained)");
  auto* valid_size =
      add_integer_option(cmd, "--valid-size", f.valid_size, "Examples of the task's validation set (default: as trained)");
  cmd->add_flag("--json", f.json, "Print the results as one JSON object");
  cmd->callback([&f, symbols, min_len, max_len, seed, valid_size] {
    if (f.task.empty() && f.data.empty()) throw ValueError("eval: give --task or --data (a language model: --data, a text file)");
    if (checkpoint_kind(f.checkpoint) == kLanguageModelKind) {
      for (const CLI::Option* option : {symbols, min_len, max_len, seed, valid_size})
        if (option->count() > 0) throw ValueError(cat(option->get_name(), " configures a built-in task, not a language model's text"));
      if (!f.task.empty()) throw ValueError(cat("--task: ", f.checkpoint, " holds a language model: give --data, a text file"));
      return evaluate_language_model(f);
    }
    if (!f.data.empty())
      for (const CLI::Option* option : {symbols, min_len, max_len, seed, valid_size})
        if (option->count() > 0) throw ValueError(cat(option->get_name(), " configures a built-in task, which --data replaces"));
    LoadedModel loaded = load_model(f.checkpoint);
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
      result = evaluate(*loaded.model, examples, loaded.vocab, loaded.labels, evaluation_tokens_for(f.checkpoint, loaded.options.context_length));
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
