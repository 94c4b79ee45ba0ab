#include "train/cli/train_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "autograd/error.h"
#include "nn/settings.h"
#include "optim/optimizer.h"
#include "train/cli/number_flags.h"
#include "train/cli/standard_output.h"
#include "train/cli/train_flags.h"
#include "train/io/interrupt.h"
#include "train/io/shell_command.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/model_config.h"
#include "train/trainer.h"

namespace tapegrad::cli {

namespace {

/// --momentum (the kMomentum rows) with an optimizer whose registration does not read it: "--momentum applies
/// to --optimizer sgd only, not adamw". An unregistered optimizer reads none (validate() names it after).
template <class Given>
void refuse_momentum(const std::vector<TrainFlag>& table, const TrainFlags& f, const Given& given) {
  const optim::OptimizerEntry* chosen = optim::optimizers().find(f.options.optimizer);
  if (chosen && chosen->uses_momentum) return;
  std::vector<std::string> readers;
  for (const optim::OptimizerEntry& e : optim::optimizers().entries())
    if (e.uses_momentum) readers.push_back(e.name);
  for (const std::string& name : flags_with(table, kMomentum))
    if (given(name))
      throw ValueError(cat(name, " applies to --optimizer ", choices_text(readers), " only, not ", f.options.optimizer));
}

/// The checks of the components' settings that depend on the chosen mode, with the table's rows of them
/// (generated from nn::declared_settings, train_flags.cpp).
///   With --init, the training-only settings given must be the checkpoint's variants' own, in their ranges: the
/// checkpoint's model with them is validated by flag name ("--moe-aux-weight applies to --ffn moe only, and
/// the --init checkpoint runs/a has --ffn dense").
void check_init_settings(const CLI::App& cmd, const TrainFlags& f) {
  const std::string config = f.options.init + "/config.json";
  nn::ClassifierOptions model = checkpoint_kind(f.options.init) == kLanguageModelKind
                                    ? nn::body_options(read_language_model_config(config))
                                    : read_model_config(config);
  for (const nn::DeclaredSetting& d : nn::declared_settings()) {
    if (d.spec.changes_model || cmd.get_option(d.spec.flag)->count() == 0) continue;
    const std::string chosen = nn::chosen_variant(model, d.kind);
    if (std::find(d.variants.begin(), d.variants.end(), chosen) == d.variants.end())
      throw ValueError(cat(d.spec.flag, " applies to --", d.kind, " ", choices_text(d.variants),
                           " only, and the --init checkpoint ", f.options.init, " has --", d.kind, " ", chosen));
  }
  nn::take_training_settings(model, f.options.model.settings);
  nn::validate(model, "", [](std::string_view field) { return flag_for(cat("model.", field)); });
}

/// "--dropout and --moe-aux-weight": the model flags that change training only (no kModelShape).
std::string training_only_flags(const std::vector<TrainFlag>& table) {
  std::string names;
  for (const TrainFlag& row : table)
    if ((row.name == "--dropout" || !row.kind.empty()) && !row.is(kModelShape))
      names += cat(names.empty() ? "" : ", ", row.name);
  if (const size_t last = names.rfind(", "); last != std::string::npos) names.replace(last, 2, " and ");
  return names;
}

/// A flag that would have no effect in the chosen mode is refused by name, never silently ignored. Which
/// flags each rule covers is the table's (train_flags.h): the rows having the rule's property. A setting of a
/// variant not chosen is nn::validate's refusal, by flag ("--attention-eps applies to --attention linear only,
/// not --attention softmax"); check_flag_values makes it.
void refuse_flags_without_effect(const CLI::App& cmd, const std::vector<TrainFlag>& table, const TrainFlags& f) {
  const auto given = [&](const std::string& name) { return cmd.get_option(name)->count() > 0; };
  const auto refuse = [&](const std::vector<std::string>& names, const std::string& why) {
    for (const std::string& name : names)
      if (given(name)) throw ValueError(cat(name, " ", why));
  };
  const auto with = [&](unsigned property) { return flags_with(table, property); };
  if (f.launch.ranks == 1)
    refuse(with(kRanksOnly), "applies to data-parallel training only: mpirun -np N tapegrad train ... (N > 1)");
  if (given("--no-overlap")) refuse({"--bucket-mb"}, "sizes the buckets that overlap backward, which --no-overlap turns off");
  if (!(f.data_parallel.bucket_mb > 0 && std::isfinite(f.data_parallel.bucket_mb)))
    throw ValueError(cat("--bucket-mb must be a finite number > 0, got ", f.data_parallel.bucket_mb));
  if (!(f.comm_timeout > 0 && std::isfinite(f.comm_timeout)))
    throw ValueError(cat("--comm-timeout must be a finite number of seconds > 0, got ", f.comm_timeout));
  if (!f.resume.empty()) {  // a resumed run keeps its saved settings; the resumable ones it can honour exactly
    for (const TrainFlag& row : table)
      if (given(row.name) && !row.is(kResumable))
        throw ValueError(cat(row.name, " cannot change when resuming: --resume continues ", f.resume,
                             " with its saved settings (start a new run with --init ", f.resume, " to change them)"));
    return;
  }
  const bool language_model = f.task == kLanguageModelTask;
  if (language_model)
    refuse(with(kClassifierOnly), cat("does not apply to --task ", kLanguageModelTask, " (a classifier's)"));
  else
    refuse(with(kLanguageModelOnly), cat("applies to --task ", kLanguageModelTask, " only"));
  if (language_model && given("--tokenizer-model")) refuse({"--vocab-size"}, "is the --tokenizer-model's own");
  // The one setting a language model fixes (nn::body_options): every position sees only its past.
  if (language_model)
    refuse({"--causal"}, cat("has no effect with --task ", kLanguageModelTask,
                             ": a language model's attention is always causal"));
  if (given("--data")) {
    std::vector<std::string> task_only = with(kTaskOnly);
    if (language_model) std::erase(task_only, std::string("--task"));  // lm is --data's text
    refuse(task_only, "configures a built-in task, which --data replaces");
  } else
    refuse(with(kDataOnly), "needs --data (a built-in task has its own validation set)");
  if (given("--valid")) refuse({"--valid-fraction"}, "splits --data, but --valid gives the validation set");
  // --init takes the model from the checkpoint: what the weights' shapes are and what they compute. Flags that
  // would change either are refused; the training-only ones (--dropout, and the settings declared so:
  // --moe-aux-weight) change neither, so a fine-tuning run sets its own (docs/reliability.md).
  if (given("--init")) {
    refuse(with(kModelShape), cat("cannot change with --init: the model's shape and what it computes are the "
                                  "checkpoint's (only the training-only ", training_only_flags(table), " can)"));
    check_init_settings(cmd, f);  // the variants are the checkpoint's: its config.json says which settings apply
  }
  if (language_model && f.options.tokenizer != "bpe")  // characters and words take every one the text has
    refuse(with(kBpeOnly), cat("applies to --tokenizer bpe only, not ", f.options.tokenizer));
  refuse_momentum(table, f, given);
  if (!given("--data") && !given("--train-size")) refuse(with(kFixedSet), "needs a fixed training set (--data or --train-size)");
  // With no encoder layer, the layers' own settings change nothing (--pool cls refuses --layers 0 itself).
  if (f.options.model.n_layers == 0 && !given("--init")) {
    const std::string why = "configures the encoder layers, and --layers 0 builds none";
    refuse(with(kLayerSetting), why);
    if (!f.options.model.final_norm) {
      std::vector<std::string> norm{"--norm"};
      for (const TrainFlag& row : table)
        if (row.kind == "norm") norm.push_back(row.name);
      refuse(norm, why + " (and no --final-norm)");
    }
    if (given("--positional") && nn::component<nn::PositionalKind>(f.options.model.positional).acts_in_attention)
      throw ValueError(cat("--positional ", f.options.model.positional, " acts inside attention, and --layers 0 builds ",
                           "no attention: the model would have no position information (use learned or sinusoidal)"));
  }
  // 0 is the library's "derive it"; given on the command line it is a mistake.
  for (auto [name, value] : {std::pair{"--steps", f.options.steps}, {"--epochs", f.options.epochs}})
    if (given(name) && value <= 0) throw ValueError(cat(name, " must be positive, got ", value));
}

/// The flags' values, by the library's rules but in the flags' names, before the library is called (whose
/// own messages name TrainOptions fields).
void check_flag_values(const TrainFlags& f) {
  TrainOptions o = f.options;
  o.task.name = f.task;  // a task's messages name it
  validate(o, flag_for);
}

}  // namespace

void add_train(CLI::App& app, TrainFlags& f) {
  auto* cmd = app.add_subcommand("train", "Train a transformer encoder classifier on a built-in task or a TSV file, or a language model on a text file (--task lm)");
  const std::vector<TrainFlag> table = train_flag_table(f);  // every flag, defined from its row
  for (const TrainFlag& row : table) row.add(cmd);
  cmd->callback([&f, cmd, table] {
    const auto check_flags = [&] {
      refuse_flags_without_effect(*cmd, table, f);
      if (f.resume.empty()) check_flag_values(f);  // a resumed run's options are the saved ones, checked on loading
    };
    if (f.launch.ranks > 1) {  // the ranks connect first, so that a flag one of them refuses stops them all
      f.ranks = connect_ranks(f.comm_timeout);
      std::string error;
      try {
        check_flags();
      } catch (const ValueError& e) {
        error = e.what();
      }
      agree_on_setup(*f.ranks, error, "{}");
    } else {
      check_flags();
    }
    TrainOptions& o = f.options;
    f.data_parallel.overlap = !f.no_overlap;
    const Parallelism parallelism{f.ranks.get(), f.data_parallel};
    TrainSummary summary;
    if (!f.resume.empty()) {
      const bool threads_given = cmd->get_option("--threads")->count() > 0;
      summary = resume(f.resume,
                       ResumeOptions{o.steps, threads_given ? o.threads : -1, o.verbose, o.detect_anomaly, o.data, o.valid,
                                     o.activation_checkpointing},
                       std::cerr, build_classifier, parallelism);
    } else {
      o.task.name = f.task;
      o.shuffle = !f.no_shuffle;
      summary = train(o, std::cerr, build_classifier, parallelism);
    }
    if (f.launch.rank != 0) return;  // rank 0 reports for all
    // The results first: a failed write (> /dev/full) is the error, before any line says the run finished.
    if (f.json) write_stdout(to_json(summary).dump() + "\n", "the results");
    if (summary.ranks > 1)
      std::fprintf(stderr,
                   "%d ranks, %lld examples per step; per step after backward, rank 0 waited %.3f ms for the other "
                   "ranks and %.3f ms for the gradient sums\n",
                   summary.ranks, static_cast<long long>(summary.global_batch), 1e3 * summary.rank_wait_seconds_per_step,
                   1e3 * summary.allreduce_seconds_per_step);
    std::fprintf(stderr, "%s after %lld steps in %.1f s (training %.1f s at %.1f steps/s, validation %.1f s, checkpoints %.1f s): ",
                 summary.reached_target ? "reached the target" : "finished", static_cast<long long>(summary.steps),
                 summary.seconds, summary.train_seconds, summary.train_steps_per_second, summary.validation_seconds,
                 summary.checkpoint_seconds);
    if (summary.language_model)
      std::fprintf(stderr, "validation loss %.4f, perplexity %.3f, %.4f bits per character (best loss %.4f at step %lld)\n",
                   summary.final_loss, std::exp(summary.final_loss), summary.final_bits_per_character, summary.best_loss,
                   static_cast<long long>(summary.best_step));
    else
      std::fprintf(stderr, "validation accuracy %.2f%% (best %.2f%% at step %lld)\n", 100 * summary.final_accuracy,
                   100 * summary.best_accuracy, static_cast<long long>(summary.best_step));
    if (summary.truncated > 0)
      std::fprintf(stderr, "%lld training sequences were cut to the context length\n", static_cast<long long>(summary.truncated));
    std::fprintf(stderr, "checkpoint: %s (best: %s/best)  metrics: %s/metrics.csv  curves: %s/curves.svg\n",
                 summary.out.c_str(), summary.out.c_str(), summary.out.c_str(), summary.out.c_str());
    if (!f.json && f.resume.empty()) {
      // "--prompt=...": a text that starts with '-' is still the flag's value.
      const std::string command =
          suggested_command({summary.language_model ? "generate" : "predict", "--checkpoint", summary.out,
                             cat(summary.language_model ? "--prompt=" : "--text=", summary.sample_text)});
      std::fprintf(stderr, "try: %s\n", command.c_str());
    }
  });
}

}  // namespace tapegrad::cli
