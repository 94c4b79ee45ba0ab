#include "train/cli/train_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <set>

#include "autograd/error.h"
#include "train/cli/number_flags.h"
#include "train/io/interrupt.h"
#include "train/checkpoint/model_config.h"
#include "train/trainer.h"

namespace tapegrad::cli {

namespace {

/// text as one shell word, whatever it contains, for a command line the user can paste.
std::string shell_quoted(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

/// The flags of the components' settings (nn::declared_settings) that change the model (its shapes or what it
/// computes), those that change training only (moe's --moe-aux-weight), and those of the encoder layers'
/// components (attention, ffn, activation; norm when there is no final norm either).
struct SettingFlags {
  std::vector<std::string> model, training_only, layers;
};
SettingFlags setting_flags(bool final_norm) {
  SettingFlags flags;
  for (const nn::DeclaredSetting& d : nn::declared_settings()) {
    (d.spec.changes_model ? flags.model : flags.training_only).push_back(d.spec.flag);
    if (d.kind == "attention" || d.kind == "ffn" || d.kind == "activation" || (d.kind == "norm" && !final_norm))
      flags.layers.push_back(d.spec.flag);
  }
  return flags;
}

/// With --init, the training-only settings given must be the checkpoint's variants' own, in their ranges: the
/// checkpoint's model with them is validated by flag name ("--moe-aux-weight applies to --ffn moe only, and the
/// --init checkpoint runs/a has --ffn dense").
void check_init_settings(const CLI::App& cmd, const TrainFlags& f) {
  nn::ClassifierOptions model = read_model_config(f.options.init + "/config.json");
  for (const nn::DeclaredSetting& d : nn::declared_settings()) {
    if (d.spec.changes_model || cmd.get_option(d.spec.flag)->count() == 0) continue;
    const std::string chosen = nn::chosen_variant(model, d.kind);
    if (std::find(d.variants.begin(), d.variants.end(), chosen) == d.variants.end())
      throw ValueError(cat(d.spec.flag, " applies to --", d.kind, " ", nn::join_names(d.variants), " only, and the --init checkpoint ",
                           f.options.init, " has --", d.kind, " ", chosen));
  }
  nn::take_training_settings(model, f.options.model.settings);
  nn::validate(model, "", [](std::string_view field) { return flag_for(cat("model.", field)); });
}

/// A flag that would have no effect in the chosen mode is refused by name, never silently ignored.
void refuse_flags_without_effect(const CLI::App& cmd, const TrainFlags& f) {
  const auto given = [&](const std::string& name) { return cmd.get_option(name)->count() > 0; };
  const auto refuse = [&](const std::vector<std::string>& names, const std::string& why) {
    for (const std::string& name : names)
      if (given(name)) throw ValueError(cat(name, " ", why));
  };
  const auto with = [](std::vector<std::string> names, const std::vector<std::string>& more) {
    names.insert(names.end(), more.begin(), more.end());
    return names;
  };
  const SettingFlags settings = setting_flags(f.options.model.final_norm);
  if (f.launch.ranks == 1)
    refuse({"--exact-reduction", "--no-overlap", "--bucket-mb", "--comm-timeout"},
           "applies to data-parallel training only: mpirun -np N tapegrad train ... (N > 1)");
  if (given("--no-overlap")) refuse({"--bucket-mb"}, "sizes the buckets that overlap backward, which --no-overlap turns off");
  if (!(f.data_parallel.bucket_mb > 0 && std::isfinite(f.data_parallel.bucket_mb)))
    throw ValueError(cat("--bucket-mb must be a finite number > 0, got ", f.data_parallel.bucket_mb));
  if (!(f.comm_timeout > 0 && std::isfinite(f.comm_timeout)))
    throw ValueError(cat("--comm-timeout must be a finite number of seconds > 0, got ", f.comm_timeout));
  if (!f.resume.empty()) {  // a resumed run keeps its saved settings; these few it can honour exactly
    const std::set<std::string> honoured = {"--resume", "--steps", "--threads", "--verbose", "--json", "--data", "--valid",
                                             "--detect-anomaly", "--exact-reduction", "--no-overlap", "--bucket-mb",
                                             "--comm-timeout"};
    for (const CLI::Option* option : cmd.get_options())
      if (option->count() > 0 && !honoured.count(option->get_name()))
        throw ValueError(cat(option->get_name(), " cannot change when resuming: --resume continues ", f.resume,
                             " with its saved settings (start a new run with --init ", f.resume, " to change them)"));
    return;
  }
  if (given("--data"))
    refuse({"--task", "--train-size", "--valid-size", "--symbols", "--min-len", "--max-len"},
           "configures a built-in task, which --data replaces");
  else
    refuse({"--valid", "--valid-fraction"}, "needs --data (a built-in task has its own validation set)");
  if (given("--valid")) refuse({"--valid-fraction"}, "splits --data, but --valid gives the validation set");
  // --init takes the model from the checkpoint: what the weights' shapes are and what they compute. Flags that
  // would change either are refused; the training-only ones (--dropout, and the settings declared so:
  // --moe-aux-weight) change neither, so a fine-tuning run sets its own (docs/reliability.md).
  if (given("--init")) {
    std::string training_only = "--dropout";
    for (size_t i = 0; i < settings.training_only.size(); ++i)
      training_only += cat(i + 1 == settings.training_only.size() ? " and " : ", ", settings.training_only[i]);
    refuse(with({"--d-model", "--heads", "--ff", "--layers", "--context-length", "--activation", "--norm-first",
                 "--final-norm", "--pool", "--positional", "--attention", "--norm", "--ffn"},
                settings.model),
           cat("cannot change with --init: the model's shape and what it computes are the checkpoint's (only the "
               "training-only ",
               training_only, " can)"));
  }
  if (f.options.optimizer != "sgd") refuse({"--momentum"}, cat("applies to --optimizer sgd only, not ", f.options.optimizer));
  if (!given("--data") && !given("--train-size"))
    refuse({"--no-shuffle", "--epochs"}, "needs a fixed training set (--data or --train-size)");
  // With no encoder layer, the layers' own settings change nothing (--pool cls refuses --layers 0 itself).
  if (f.options.model.n_layers == 0 && !given("--init")) {
    const std::string why = "configures the encoder layers, and --layers 0 builds none";
    refuse(with({"--heads", "--ff", "--attention", "--ffn", "--activation", "--norm-first"}, settings.layers), why);
    if (!f.options.model.final_norm) refuse({"--norm"}, why + " (and no --final-norm)");
    if (given("--positional") && nn::component<nn::PositionalKind>(f.options.model.positional).acts_in_attention)
      throw ValueError(cat("--positional ", f.options.model.positional, " acts inside attention, and --layers 0 builds ",
                           "no attention: the model would have no position information (use learned or sinusoidal)"));
  }
  // The variants are the checkpoint's: its config.json says which settings apply. (Without --init, a setting
  // of a variant not chosen is nn::validate's refusal, by flag: "--attention-eps applies to --attention
  // linear only, not --attention softmax".)
  if (given("--init") && !settings.training_only.empty()) check_init_settings(cmd, f);
  // 0 is the library's "derive it"; given on the command line it is a mistake.
  for (auto [name, value] : {std::pair{"--steps", f.options.steps}, {"--epochs", f.options.epochs}})
    if (given(name) && value <= 0) throw ValueError(cat(name, " must be positive, got ", value));
}

/// --<flag> choosing a registered component of Kind by name; the help lists every variant this program
/// has registered (a user's program lists its own too) with what it computes.
template <class Kind>
void add_component_option(CLI::App* cmd, const std::string& flag, std::string& field, const std::string& what) {
  std::string help = what + ":";
  for (const std::string& name : nn::component_names<Kind>())
    help += cat("\n  ", name, ": ", nn::component<Kind>(name).help);
  cmd->add_option(flag, field, help)->check(CLI::IsMember(nn::component_names<Kind>()))->capture_default_str();
}

/// The components' settings, one flag each from its declaration (nn::declared_settings), with its help, the
/// variants that declare it, its default and range ("--ffn moe: experts per layer, in [1, 1024]"). A flag given
/// sets the value in `settings`; one not given leaves the variant's default.
void add_setting_options(CLI::App* cmd, nn::ComponentSettings& settings) {
  for (const nn::DeclaredSetting& d : nn::declared_settings()) {
    const std::string range = nn::range_text(d.spec);
    const std::string help = cat("--", d.kind, " ", nn::join_names(d.variants), ": ", d.spec.help,
                                 range.empty() ? "" : cat(", in ", range));
    const std::string kind = d.kind, name = d.spec.name, flag = d.spec.flag;
    CLI::Option* option = nullptr;
    switch (d.spec.type) {
      case nn::SettingType::flag:
        option = cmd->add_flag_function(flag, [&settings, kind, name](int64_t) { settings.set(kind, name, true); }, help);
        break;
      case nn::SettingType::integer:
        option = cmd->add_option_function<std::string>(flag, [&settings, kind, name, flag](const std::string& text) {
                       settings.set(kind, name, parse_signed(flag, text, INT64_MIN, INT64_MAX));
                     }, help)->type_name("INT");
        break;
      case nn::SettingType::real:
        option = cmd->add_option_function<std::string>(flag, [&settings, kind, name, flag](const std::string& text) {
                       settings.set(kind, name, parse_real(flag, text));
                     }, help)->type_name("FLOAT");
        break;
    }
    if (d.spec.type != nn::SettingType::flag) option->default_str(nn::format_setting(d.spec.default_value));
  }
}

/// The flags' values, by the library's rules but in the flags' names, before the library is called (whose
/// own messages name TrainOptions fields).
void check_flag_values(const TrainFlags& f) {
  TrainOptions o = f.options;
  o.task.name = f.task;  // a task's messages name it
  validate(o, flag_for);
}

}  // namespace

std::string flag_for(std::string_view field) {
  if (field.starts_with("model."))  // a component's setting: its declared flag ("model.norm.eps" -> "--norm-eps")
    if (std::string flag = nn::setting_flag(field.substr(6)); !flag.empty()) return flag;
  if (field == "model.n_heads") return "--heads";
  if (field == "model.d_ff") return "--ff";
  if (field == "model.n_layers") return "--layers";
  if (field == "task.name") return "--task";
  for (std::string_view group : {"model.", "task."})  // model.d_model -> --d-model, task.max_len -> --max-len
    if (field.starts_with(group)) field.remove_prefix(group.size());
  std::string flag = cat("--", field);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

void add_train(CLI::App& app, TrainFlags& f, const std::string& program) {
  TrainOptions& o = f.options;
  auto* cmd = app.add_subcommand("train", "Train a transformer encoder classifier on a built-in task or a TSV file");
  cmd->add_option("--task", f.task, "Built-in task: majority | order")->capture_default_str();
  add_path_option(cmd, "--data", o.data, "Training data: a TSV file of label<TAB>text lines");
  add_path_option(cmd, "--valid", o.valid, "Validation TSV (default: a seeded split of --data)");
  add_real_option(cmd, "--valid-fraction", o.valid_fraction, "Share of --data held out when --valid is not given")->capture_default_str();
  add_integer_option(cmd, "--train-size", o.train_size, "Task only: a fixed training set of this many examples (0: fresh ones every batch)")->capture_default_str();
  add_integer_option(cmd, "--valid-size", o.valid_size, "Task only: examples in the validation set (fewer for long sequences)")->capture_default_str();
  add_integer_option(cmd, "--symbols", o.task.symbols, "Task vocabulary size V (words t0..t{V-1})")->capture_default_str();
  add_integer_option(cmd, "--min-len", o.task.min_len, "Shortest generated sequence")->capture_default_str();
  add_integer_option(cmd, "--max-len", o.task.max_len, "Longest generated sequence")->capture_default_str();
  add_integer_option(cmd, "--d-model", o.model.d_model, "Model width")->capture_default_str();
  add_integer_option(cmd, "--heads", o.model.n_heads, "Attention heads")->capture_default_str();
  add_integer_option(cmd, "--ff", o.model.d_ff, "Feed-forward width")->capture_default_str();
  add_integer_option(cmd, "--layers", o.model.n_layers, "Encoder layers")->capture_default_str();
  add_integer_option(cmd, "--context-length", o.context_length, "Longest sequence the model accepts (0: the longest the data can produce)")->capture_default_str();
  add_component_option<nn::PositionalKind>(cmd, "--positional", o.model.positional, "Position information");
  add_component_option<nn::AttentionKind>(cmd, "--attention", o.model.attention, "Self-attention of each layer");
  add_component_option<nn::NormKind>(cmd, "--norm", o.model.norm, "Normalisation of each layer (and the final one)");
  add_component_option<nn::FeedForwardKind>(cmd, "--ffn", o.model.ffn, "Position-wise block of each layer");
  add_component_option<nn::ActivationKind>(cmd, "--activation", o.model.activation, "Activation of the feed-forward block");
  add_component_option<nn::PoolKind>(cmd, "--pool", o.model.pool, "How a sequence becomes one vector");
  cmd->add_flag("--norm-first", o.model.norm_first, "Pre-LN layers (the norm before attention and feed-forward)");
  cmd->add_flag("--final-norm", o.model.final_norm, "A norm after the last encoder layer");
  add_real_option(cmd, "--dropout", o.model.dropout, "Dropout probability")->capture_default_str();
  add_setting_options(cmd, o.model.settings);
  cmd->add_option("--optimizer", o.optimizer, "sgd | adam | adamw")->capture_default_str();
  add_real_option(cmd, "--lr", o.lr, "Learning rate")->capture_default_str();
  add_real_option(cmd, "--weight-decay", o.weight_decay, "Weight decay (decoupled for adamw, L2 otherwise)")->capture_default_str();
  add_real_option(cmd, "--momentum", o.momentum, "SGD momentum")->capture_default_str();
  add_integer_option(cmd, "--warmup", o.warmup, "Linear warm-up steps")->capture_default_str();
  cmd->add_option("--schedule", o.schedule, "Learning rate after warm-up: constant | cosine | linear")->capture_default_str();
  add_real_option(cmd, "--clip-grad", o.clip_grad, "Clip the global gradient norm to this (0: off)")->capture_default_str();
  add_integer_option(cmd, "--batch-size", o.batch_size, "Examples per step")->capture_default_str();
  add_integer_option(cmd, "--steps", o.steps, "Total optimizer steps (default 2000, or from --epochs)");
  add_integer_option(cmd, "--epochs", o.epochs, "Passes over a fixed training set (--data or --train-size)");
  add_integer_option(cmd, "--seed", o.seed, "Seed of every random stream")->capture_default_str();
  add_integer_option(cmd, "--threads", o.threads, "Threads for everything, BLAS included (0: every core)")->capture_default_str();
  add_integer_option(cmd, "--eval-every", o.eval_every, "Validate (and checkpoint) every this many steps")->capture_default_str();
  add_integer_option(cmd, "--log-every", o.log_every, "Add the mean training loss of the last this many steps to metrics.csv and curves.svg")->capture_default_str();
  add_real_option(cmd, "--target-acc", o.target_acc, "Stop once validation accuracy reaches this fraction (0: never)")->capture_default_str();
  add_path_option(cmd, "--out", o.out, "Run directory: checkpoint, best/, metrics.csv, curves.svg")->capture_default_str();
  add_path_option(cmd, "--init", o.init, "Start from this checkpoint's weights and vocabulary, with a fresh optimizer");
  add_path_option(cmd, "--resume", f.resume, "Continue this run directory exactly where it stopped (--steps sets a new total)");
  cmd->add_flag("--no-shuffle", f.no_shuffle, "Visit a fixed training set in file order");
  cmd->add_flag("--overwrite", o.overwrite, "Replace a training run already in --out (refused otherwise)");
  cmd->add_flag("--json", f.json, "Print one JSON line with the results on stdout at the end");
  cmd->add_flag("--verbose", o.verbose, "Also print the threads and the BLAS kernels in use");
  cmd->add_flag("--detect-anomaly", o.detect_anomaly,
                "Check every op for NaN and Inf and name the first that makes one, with its shapes and place in the model (slower)");
  // Data parallelism: `mpirun -np N tapegrad train ...` (docs/distributed.md).
  cmd->add_flag("--exact-reduction", f.data_parallel.exact,
                "mpirun: add the ranks' gradients in rank order in double, the same bits in every run (slower)");
  cmd->add_flag("--no-overlap", f.no_overlap, "mpirun: sum the gradients after backward, not bucket by bucket during it");
  add_real_option(cmd, "--bucket-mb", f.data_parallel.bucket_mb, "mpirun: gradient megabytes per bucket summed during backward")
      ->capture_default_str();
  add_real_option(cmd, "--comm-timeout", f.comm_timeout, "mpirun: seconds to wait for the other ranks before stopping")
      ->capture_default_str();
  cmd->callback([&f, program, cmd] {
    const auto check_flags = [&] {
      refuse_flags_without_effect(*cmd, f);
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
                       ResumeOptions{o.steps, threads_given ? o.threads : -1, o.verbose, o.detect_anomaly, o.data, o.valid},
                       std::cerr, build_classifier, parallelism);
    } else {
      o.task.name = f.task;
      o.shuffle = !f.no_shuffle;
      summary = train(o, std::cerr, build_classifier, parallelism);
    }
    if (f.launch.rank != 0) return;  // rank 0 reports for all
    if (summary.ranks > 1)
      std::fprintf(stderr,
                   "%d ranks, %lld examples per step; per step after backward, rank 0 waited %.3f ms for the other "
                   "ranks and %.3f ms for the gradient sums\n",
                   summary.ranks, static_cast<long long>(summary.global_batch), 1e3 * summary.rank_wait_seconds_per_step,
                   1e3 * summary.allreduce_seconds_per_step);
    std::fprintf(stderr,
                 "%s after %lld steps in %.1f s (training %.1f s at %.1f steps/s, validation %.1f s, checkpoints %.1f s): "
                 "validation accuracy %.2f%% (best %.2f%% at step %lld)\n",
                 summary.reached_target ? "reached the target" : "finished", static_cast<long long>(summary.steps),
                 summary.seconds, summary.train_seconds, summary.train_steps_per_second, summary.validation_seconds,
                 summary.checkpoint_seconds, 100 * summary.final_accuracy, 100 * summary.best_accuracy,
                 static_cast<long long>(summary.best_step));
    if (summary.truncated > 0)
      std::fprintf(stderr, "%lld training sequences were cut to the context length\n", static_cast<long long>(summary.truncated));
    std::fprintf(stderr, "checkpoint: %s (best: %s/best)  metrics: %s/metrics.csv  curves: %s/curves.svg\n",
                 summary.out.c_str(), summary.out.c_str(), summary.out.c_str(), summary.out.c_str());
    if (f.json) {
      std::cout << to_json(summary).dump() << std::endl;
    } else if (f.resume.empty()) {
      std::fprintf(stderr, "try: %s predict --checkpoint %s --text %s\n", program.c_str(), shell_quoted(summary.out).c_str(),
                   shell_quoted(summary.sample_text).c_str());
    }
  });
}

}  // namespace tapegrad::cli
