// tapegrad: the command line. train, eval, predict, gradcheck, bench; each has --help.
// A bad flag, value or file gets one line on stderr and a non-zero exit, never a stack trace.
#include "train/cli/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <new>
#include <set>
#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "train/attention_map.h"
#include "train/batching.h"
#include "train/bench.h"
#include "train/cli/number_flags.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/interrupt.h"
#include "train/read_file.h"
#include "train/run_state.h"
#include "train/model_config.h"
#include "train/mpi/launch.h"
#include "train/text_lines.h"
#include "train/trainer.h"
#include "train/tsv.h"

using namespace tapegrad;
using namespace tapegrad::cli;
using nlohmann::json;

namespace {

// ---- train ----
struct TrainFlags {
  TrainOptions options;
  std::string task = "majority", resume;
  bool no_shuffle = false, json = false;
  // Data parallelism: how mpirun started this process, the ranks once connected, and their settings.
  Launch launch = launch_from_environment();
  std::unique_ptr<Communicator> ranks;
  DataParallelOptions data_parallel;
  bool no_overlap = false;
  double comm_timeout = 60;
};

/// text as one shell word, whatever it contains, for a command line the user can paste.
std::string shell_quoted(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

/// A flag that would have no effect in the chosen mode is refused by name, never silently ignored.
void refuse_flags_without_effect(const CLI::App& cmd, const TrainFlags& f) {
  const auto given = [&](const std::string& name) { return cmd.get_option(name)->count() > 0; };
  const auto refuse = [&](std::initializer_list<const char*> names, const std::string& why) {
    for (const char* name : names)
      if (given(name)) throw ValueError(cat(name, " ", why));
  };
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
  // would change either are refused; the training-only ones (--dropout, --moe-aux-weight) change neither, so a
  // fine-tuning run sets its own (docs/reliability.md).
  if (given("--init"))
    refuse({"--d-model", "--heads", "--ff", "--layers", "--context-length", "--activation", "--norm-first", "--final-norm",
            "--pool", "--positional", "--attention", "--norm", "--ffn", "--causal", "--temperature", "--experts",
            "--top-k"},
           "cannot change with --init: the model's shape and what it computes are the checkpoint's (only the "
           "training-only --dropout and --moe-aux-weight can)");
  if (f.options.optimizer != "sgd") refuse({"--momentum"}, cat("applies to --optimizer sgd only, not ", f.options.optimizer));
  if (!given("--data") && !given("--train-size"))
    refuse({"--no-shuffle", "--epochs"}, "needs a fixed training set (--data or --train-size)");
  // With no encoder layer, the layers' own settings change nothing (--pool cls refuses --layers 0 itself).
  if (f.options.model.n_layers == 0 && !given("--init")) {
    const std::string why = "configures the encoder layers, and --layers 0 builds none";
    refuse({"--heads", "--ff", "--attention", "--ffn", "--experts", "--top-k", "--moe-aux-weight", "--activation",
            "--causal", "--temperature", "--norm-first"},
           why);
    if (!f.options.model.final_norm) refuse({"--norm"}, why + " (and no --final-norm)");
    if (given("--positional") && nn::component<nn::PositionalKind>(f.options.model.positional).acts_in_attention)
      throw ValueError(cat("--positional ", f.options.model.positional, " acts inside attention, and --layers 0 builds ",
                           "no attention: the model would have no position information (use learned or sinusoidal)"));
  }
  if (given("--init")) {  // the block is the checkpoint's: its config.json says whether it is moe
    if (given("--moe-aux-weight") && read_model_config(f.options.init + "/config.json").ffn != "moe")
      throw ValueError(cat("--moe-aux-weight applies to --ffn moe only, and the --init checkpoint ", f.options.init,
                           " has no moe block"));
  } else if (f.options.model.ffn != "moe") {
    refuse({"--experts", "--top-k", "--moe-aux-weight"}, cat("applies to --ffn moe only, not --ffn ", f.options.model.ffn));
  }
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

/// The flag that sets a TrainOptions field ("model.d_ff" -> "--ff"): validate()'s names on the command line.
std::string flag_for(std::string_view field) {
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

/// The flags' values, by the library's rules but in the flags' names, before the library is called (whose
/// own messages name TrainOptions fields).
void check_flag_values(const TrainFlags& f) {
  TrainOptions o = f.options;
  o.task.name = f.task;  // a task's messages name it
  validate(o, flag_for);
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
  add_integer_option(cmd, "--experts", o.model.experts, "--ffn moe: experts per layer")->capture_default_str();
  add_integer_option(cmd, "--top-k", o.model.top_k, "--ffn moe: experts each token goes through")->capture_default_str();
  add_real_option(cmd, "--moe-aux-weight", o.model.moe_aux_weight, "--ffn moe: weight of the load-balancing loss")
      ->capture_default_str();
  add_component_option<nn::ActivationKind>(cmd, "--activation", o.model.activation, "Activation of the feed-forward block");
  add_component_option<nn::PoolKind>(cmd, "--pool", o.model.pool, "How a sequence becomes one vector");
  cmd->add_flag("--norm-first", o.model.norm_first, "Pre-LN layers (the norm before attention and feed-forward)");
  cmd->add_flag("--final-norm", o.model.final_norm, "A norm after the last encoder layer");
  add_real_option(cmd, "--dropout", o.model.dropout, "Dropout probability")->capture_default_str();
  cmd->add_flag("--causal", o.model.causal, "Causal self-attention: each position sees earlier ones only (GPT-style)");
  add_real_option(cmd, "--temperature", o.model.temperature, "Attention softmax temperature: softmax(q k^T / (sqrt(D) * t))")->capture_default_str();
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

// ---- eval ----
struct EvalFlags {
  std::string checkpoint, task, data;
  TaskOptions task_options;
  uint64_t seed = 0;
  int64_t valid_size = TrainOptions().valid_size;
  bool json = false;
};

/// The training options saved with a checkpoint, when it has them (for the task's defaults); a damaged
/// trainer.json is an error, not a silent fallback to other defaults.
std::optional<TrainOptions> saved_options(const std::string& dir) {
  const std::string path = dir + "/trainer.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  const json state = read_trainer_state(path);
  if (!state.is_object() || !state.contains("options")) throw IOError(cat(path, ": no \"options\" object"));
  return train_options_from_json(state.at("options"), path);
}

/// The evaluation batch budget for a checkpoint: the tokens of the batch it was trained with (evaluate.h).
int64_t evaluation_tokens_for(const std::string& dir, const LoadedModel& loaded) {
  const auto saved = saved_options(dir);
  return evaluation_tokens(saved ? saved->batch_size : TrainOptions().batch_size, loaded.options.context_length);
}

// ---- eval and predict: outputs that cannot be trusted are errors ----

/// The largest finite value of a float dtype.
double largest_finite(DType dtype) {
  return dtype == DType::float64 ? std::numeric_limits<double>::max() : std::numeric_limits<float>::max();
}

DType model_dtype(const LoadedModel& loaded) {
  const nn::NamedTensors parameters = loaded.model->named_parameters();
  return parameters.empty() ? DType::float32 : parameters.front().second.dtype();
}

/// load_model, and config.json refused up front when it cannot give finite outputs whatever the text:
/// the attention multiplies its queries by 1/temperature (nn/attention.cpp), and a temperature whose
/// reciprocal overflows the weights' dtype makes every attention score infinite (1e-300 in a float32 model).
LoadedModel load_model_for_outputs(const std::string& dir) {
  LoadedModel loaded = load_model(dir);
  const DType dtype = model_dtype(loaded);
  const double t = loaded.options.temperature;
  if (1.0 / t > largest_finite(dtype))
    throw IOError(cat(dir, "/config.json: temperature = ", t, " is so small that 1/temperature overflows ",
                      dtype_name(dtype), ": every attention score would be infinite and every output NaN"));
  return loaded;
}

/// A NonFiniteOutput of classify or evaluate as the one line eval and predict give: the checkpoint, which
/// output of which text or example, and the cause.
[[noreturn]] void refuse_non_finite(const NonFiniteOutput& e, const std::string& checkpoint, const LoadedModel& loaded,
                                    const std::string& item) {
  std::string cause = overflow_cause(*loaded.model);
  const std::string temperature = "attention temperature ";
  if (const size_t at = cause.find(temperature); at != std::string::npos)
    cause.replace(at, temperature.size(), "config.json temperature ");  // where the user can change it
  if (e.sequence >= 0 && e.class_index >= 0)
    throw ValueError(cat(checkpoint, ": the logits of ", item, " ", e.sequence + 1, " are not finite ('",
                         loaded.labels[e.class_index], "' is ", e.value, ") ", cause));
  std::string what = e.what();
  if (what.starts_with("evaluate: ")) what.erase(0, 10);
  throw ValueError(cat(checkpoint, ": ", what));
}

/// predict's stdin: all of it (to the TSV data limit, so a pipe that never ends is refused rather than
/// held), read by the rules of every line reader (text_lines.h: BOM and CRLF accepted; invalid UTF-8, NUL
/// and CR-only line ends refused with the line). Blank lines are skipped, as in TSV data.
std::vector<std::string> texts_from_stdin() {
  std::string text;
  char chunk[1 << 16];
  while (std::cin.read(chunk, sizeof chunk) || std::cin.gcount() > 0) {
    if (text.size() + static_cast<uint64_t>(std::cin.gcount()) > kTsvLimit.bytes)
      throw IOError(cat("stdin: more than ", kTsvLimit.bytes, " bytes: the limit for the texts to classify is that of ",
                        kTsvLimit.kind, " (", kTsvLimit.bytes >> 20, " MiB)"));
    text.append(chunk, static_cast<size_t>(std::cin.gcount()));
  }
  std::vector<std::string> texts;
  for_each_line(text, "stdin", [&](int64_t, std::string_view line) {
    if (!split_words(line).empty()) texts.emplace_back(line);
  });
  return texts;
}

/// --text values must be texts a TSV line could hold: valid UTF-8 with at least one word. An empty text
/// would be classified as a lone unknown word, a prediction about nothing.
void check_texts(const std::vector<std::string>& texts) {
  for (size_t i = 0; i < texts.size(); ++i) {
    if (const size_t bad = find_invalid_utf8(texts[i]); bad != texts[i].size())
      throw ValueError(cat("--text number ", i + 1, ": invalid UTF-8 at byte ", bad + 1, " of the text"));
    if (split_words(texts[i]).empty())
      throw ValueError(cat("--text number ", i + 1, ": empty text (a text needs at least one word, as in TSV data)"));
  }
}

void add_eval(CLI::App& app, EvalFlags& f) {
  auto* cmd = app.add_subcommand("eval", "Loss, accuracy and confusion matrix of a checkpoint on a task or a TSV file");
  add_path_option(cmd, "--checkpoint", f.checkpoint, "Checkpoint directory (a run directory or its best/)")->required();
  auto* task = cmd->add_option("--task", f.task, "Built-in task: majority | order (the task's validation set)");
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

// ---- predict ----
struct PredictFlags {
  std::string checkpoint, attention_svg;
  std::vector<std::string> texts;
  bool json = false;
};

void add_predict(CLI::App& app, PredictFlags& f) {
  auto* cmd = app.add_subcommand("predict", "Label and class probabilities of texts (from --text or one per line on stdin)");
  add_path_option(cmd, "--checkpoint", f.checkpoint, "Checkpoint directory (a run directory or its best/)")->required();
  cmd->add_option("--text", f.texts, "A text to classify (repeatable)");
  add_path_option(cmd, "--attention-svg", f.attention_svg, "Draw the attention weights of the first text as heatmaps into this SVG file");
  cmd->add_flag("--json", f.json, "One JSON object per text: label, probs, logits");
  cmd->callback([&f] {
    if (!f.attention_svg.empty()) {
      try {
        check_attention_map_path(f.attention_svg);
      } catch (const IOError& e) {
        throw ValueError(cat("--attention-svg ", e.what()));
      }
    }
    check_texts(f.texts);
    LoadedModel loaded = load_model_for_outputs(f.checkpoint);
    const std::vector<std::string> texts = f.texts.empty() ? texts_from_stdin() : f.texts;
    if (texts.empty()) throw ValueError("no texts (give --text or lines on stdin)");
    const bool cls = nn::prepends_cls(loaded.options);
    const int64_t context = loaded.options.context_length;
    std::vector<std::vector<int64_t>> sequences;
    std::vector<bool> truncated;
    for (const std::string& text : texts) {
      bool cut = false;
      sequences.push_back(encode_text(text, loaded.vocab, context, cls, &cut));
      truncated.push_back(cut);
    }
    Tensor logits;  // (N, K)
    try {
      logits = classify(*loaded.model, sequences, evaluation_tokens_for(f.checkpoint, loaded));
    } catch (const NonFiniteOutput& e) {
      refuse_non_finite(e, f.checkpoint, loaded, "text");
    }
    // Probabilities from finite logits are finite: softmax subtracts the row's largest logit first.
    const std::vector<double> all_z = logits.to_vector(), all_p = softmax(logits, -1).to_vector();
    if (!f.attention_svg.empty()) {  // the first text alone, so that its heatmaps have no padding
      const int64_t panels = loaded.options.n_layers * loaded.options.n_heads,
                    limit = attention_map_token_limit(panels), T = static_cast<int64_t>(sequences[0].size());
      if (T > limit)
        throw ValueError(cat("--attention-svg ", f.attention_svg, ": text 1 has ", T, " tokens, more than the ", limit,
                             " an attention map of this model's ", loaded.options.n_layers, " layers x ",
                             loaded.options.n_heads, " heads draws (", kAttentionMapCells,
                             " cells at most); put a shorter text first"));
      NoGradGuard no_grad;
      const PaddedIds first = pad_sequences(sequences, std::vector<int64_t>{0});
      std::vector<Tensor> attention;
      loaded.model->forward(first.ids, first.key_padding_mask, &attention);
      // An attention without a (T, T) matrix (linear attention) returns no weights: say which, not "undefined".
      for (const Tensor& w : attention)
        if (!w.defined())
          throw ValueError(cat("predict --attention-svg: this model's attention '", loaded.options.attention,
                               "' computes no (T, T) attention weights, so there are no heatmaps to draw"));
      std::vector<std::string> tokens;
      for (int64_t id : sequences[0]) tokens.push_back(loaded.vocab.token(id));
      write_attention_svg(f.attention_svg, tokens, attention, "attention: " + texts[0]);
    }
    const size_t K = loaded.labels.size();
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::vector<double> z(all_z.begin() + i * K, all_z.begin() + (i + 1) * K),
          p(all_p.begin() + i * K, all_p.begin() + (i + 1) * K);
      const size_t best = std::max_element(p.begin(), p.end()) - p.begin();
      if (f.json) {
        json probs = json::object(), logit = json::object();
        for (size_t c = 0; c < p.size(); ++c) {
          probs[loaded.labels[c]] = p[c];
          logit[loaded.labels[c]] = z[c];
        }
        std::cout << json{{"text", texts[i]}, {"label", loaded.labels[best]}, {"probs", probs}, {"logits", logit}}.dump()
                  << std::endl;
      } else {
        std::printf("%s\t", loaded.labels[best].c_str());
        for (size_t c = 0; c < p.size(); ++c) std::printf("%s%s=%.4f", c ? " " : "", loaded.labels[c].c_str(), p[c]);
        std::printf("\t%s\n", texts[i].c_str());
      }
      if (truncated[i]) std::fprintf(stderr, "note: text %zu was cut to the context length %lld\n", i + 1,
                                     static_cast<long long>(context));
    }
    if (!f.attention_svg.empty()) std::fprintf(stderr, "attention heatmaps: %s\n", f.attention_svg.c_str());
  });
}

// ---- gradcheck ----
struct GradcheckFlags {
  bool json = false, list = false;
  std::string filter;
};

void add_gradcheck(CLI::App& app, GradcheckFlags& f) {
  auto* cmd = app.add_subcommand("gradcheck", "Run the float64 gradient checks of every op and layer");
  auto* as_json = cmd->add_flag("--json", f.json, "One JSON object with every case");
  cmd->add_option("--filter", f.filter, "Only cases whose name contains this");
  cmd->add_flag("--list", f.list, "Print the names of the cases (those --filter picks) without running them")
      ->excludes(as_json);
  cmd->callback([&f] {
    const bool as_json = f.json;
    const std::string& filter = f.filter;
    json cases = json::array();
    int failed = 0, run = 0;
    double worst_rel = 0;
    std::vector<const GradcheckCase*> chosen;
    for (const GradcheckCase& c : gradcheck_cases())
      if (c.name.find(filter) != std::string::npos) chosen.push_back(&c);
    if (chosen.empty())  // before any output: a mistyped filter in CI must not look green
      throw ValueError(cat("--filter '", filter, "' matches none of the ", gradcheck_cases().size(),
                           " cases (tapegrad gradcheck --list names them all)"));
    if (f.list) {
      for (const GradcheckCase* c : chosen) std::printf("%s\n", c->name.c_str());
      return;
    }
    if (!as_json) std::printf("%-48s %12s %12s  %s\n", "case", "max abs err", "max rel err", "result");
    for (const GradcheckCase* chosen_case : chosen) {
      const GradcheckCase& c = *chosen_case;
      const GradcheckResult r = c.run(GradcheckOptions::float64());
      ++run;
      failed += !r.passed;
      worst_rel = std::max(worst_rel, r.max_rel_error());
      if (as_json)
        cases.push_back({{"name", c.name}, {"max_abs_error", r.max_abs_error()}, {"max_rel_error", r.max_rel_error()},
                         {"passed", r.passed}});
      else
        std::printf("%-48s %12.3e %12.3e  %s\n", c.name.c_str(), r.max_abs_error(), r.max_rel_error(), r.passed ? "pass" : "FAIL");
    }
    if (as_json)
      std::cout << json{{"cases", cases}, {"passed", run - failed}, {"failed", failed}, {"worst_rel_error", worst_rel}}.dump()
                << std::endl;
    else
      std::printf("%d passed, %d failed (worst relative error %.3e)\n", run - failed, failed, worst_rel);
    if (failed) throw ValueError(cat("gradcheck: ", failed, " case(s) failed"));
  });
}

struct BenchFlags {
  std::vector<std::string> configs{"small", "medium"};
  int64_t d_model = 0, heads = 0, d_ff = 0, layers = 0, seq = 0, batch = 0, warmup = 0, steps = 0;  // when given
  int threads = 0;
  bool json = false;
};

void add_bench(CLI::App& app, BenchFlags& f) {
  auto* cmd = app.add_subcommand("bench", "Time training steps of named model sizes (see docs/performance.md)");
  cmd->add_option("--config", f.configs, cat("Named configurations, comma-separated: ", bench_config_names()))
      ->delimiter(',')
      ->capture_default_str();
  // Each override given replaces its field in every configuration; the others keep the configuration's.
  struct Override {
    CLI::Option* option;
    const int64_t* value;
    int64_t BenchConfig::*field;
  };
  const auto override_option = [&](const char* flag, int64_t& value, int64_t BenchConfig::*field, const char* help) {
    return Override{add_integer_option(cmd, flag, value, help), &value, field};
  };
  const std::vector<Override> overrides = {
      override_option("--d-model", f.d_model, &BenchConfig::d_model, "Override d_model"),
      override_option("--heads", f.heads, &BenchConfig::heads, "Override the number of heads"),
      override_option("--d-ff", f.d_ff, &BenchConfig::d_ff, "Override d_ff"),
      override_option("--layers", f.layers, &BenchConfig::layers, "Override the number of layers"),
      override_option("--seq", f.seq, &BenchConfig::seq, "Override the sequence length T"),
      override_option("--batch", f.batch, &BenchConfig::batch, "Override the batch size"),
      override_option("--warmup", f.warmup, &BenchConfig::warmup, "Override the untimed warm-up steps"),
      override_option("--steps", f.steps, &BenchConfig::steps, "Override the timed steps")};
  add_integer_option(cmd, "--threads", f.threads, "Threads (0: every core)")->capture_default_str();
  cmd->add_flag("--json", f.json, "One JSON line per configuration");
  cmd->callback([&f, overrides, cmd] {
    // Every configuration is built and checked before any is measured: a bad value in the second must not
    // be found after the first has run.
    std::vector<BenchConfig> configs;
    for (const std::string& name : f.configs) {
      BenchConfig config = bench_config(name);
      for (const Override& o : overrides)
        if (o.option->count() > 0) config.*o.field = *o.value;
      if (cmd->get_option("--steps")->count() > 0)  // no more timed chunks than steps
        config.repeats = std::min<int64_t>(config.repeats, std::max<int64_t>(f.steps, 1));
      config.threads = f.threads;
      validate(config);
      configs.push_back(config);
    }
    // Measured again before each configuration, keeping the best: a neighbour that ran during one
    // measurement would otherwise understate the peak and overstate every utilisation after it.
    double peak = 0;
    for (const BenchConfig& config : configs) {
      peak = std::max(peak, measure_fma_peak_gflops(f.threads));
      const BenchResult result = run_bench(config, peak);
      if (f.json) std::cout << to_json(result).dump() << std::endl;
      else std::cout << describe(result) << std::flush;
    }
  });
}

}  // namespace

int tapegrad::cli::main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f), write() fails with EFBIG, which the checkpoint code reports with
  // the file's name, instead of SIGXFSZ killing the process without a word.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"tapegrad: a from-scratch training framework with a dynamic tape autograd"};
  app.require_subcommand(1);
  TrainFlags train_flags;
  EvalFlags eval_flags;
  PredictFlags predict_flags;
  GradcheckFlags gradcheck_flags;
  add_train(app, train_flags, argv[0]);
  add_eval(app, eval_flags);
  add_predict(app, predict_flags);
  add_gradcheck(app, gradcheck_flags);
  BenchFlags bench_flags;
  add_bench(app, bench_flags);
  // Only training runs on several ranks; anything else mpirun starts N times would do N times the same.
  if (const Launch launch = launch_from_environment(); launch.ranks > 1 && (argc < 2 || std::string(argv[1]) != "train")) {
    if (launch.rank == 0)
      std::fprintf(stderr, "tapegrad: mpirun started %d ranks, but only `tapegrad train` runs on several; run %s on one "
                   "process, without mpirun\n", launch.ranks, argc < 2 ? "it" : argv[1]);
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    const std::string sub = app.get_subcommands().empty() ? "" : " " + app.get_subcommands()[0]->get_name();
    std::fprintf(stderr, "tapegrad%s: %s (see tapegrad%s --help)\n", sub.c_str(), e.what(), sub.c_str());
    return 2;
  } catch (const Interrupted& e) {  // stopped by SIGINT or SIGTERM after saving: exit as a shell reports it
    if (train_flags.launch.rank == 0) std::fprintf(stderr, "%s\n", e.what());
    return 128 + e.signal;
  } catch (const AgreedError& e) {  // every rank knows: rank 0 says it once
    if (train_flags.launch.rank == 0) std::fprintf(stderr, "tapegrad train: %s\n", e.what());
    return 1;
  } catch (const std::exception& caught) {
    // bad_alloc is the last line of defence: the checks before allocating should have named the flag.
    const std::runtime_error out_of_memory("out of memory (an allocation failed); lower the sizes the command line asks for");
    const std::exception& e = dynamic_cast<const std::bad_alloc*>(&caught) ? out_of_memory : caught;
    if (train_flags.launch.ranks > 1 && !train_flags.ranks && train_flags.launch.rank != 0) return 1;  // rank 0 says it
    if (train_flags.ranks && train_flags.ranks->size() > 1) {
      // Only this rank knows: the others would wait for it in their next collective, so all stop now.
      if (dynamic_cast<const CommunicationError*>(&e))  // it names the rank
        std::fprintf(stderr, "tapegrad train: %s\n", e.what());
      else
        std::fprintf(stderr, "tapegrad train (rank %d of %d): %s\n", train_flags.ranks->rank(), train_flags.ranks->size(),
                     e.what());
      std::fflush(stderr);
      train_flags.ranks->abort(1);
    }
    const std::string sub = app.get_subcommands().empty() ? "" : " " + app.get_subcommands()[0]->get_name();
    std::fprintf(stderr, "tapegrad%s: %s\n", sub.c_str(), e.what());
    return 1;
  }
  // Results that could not be written (stdout on a full disk, a file-size limit) are a failure, never a
  // silent exit 0.
  std::cout.flush();
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || std::cout.fail()) {
    const std::string sub = app.get_subcommands().empty() ? "" : " " + app.get_subcommands()[0]->get_name();
    std::fprintf(stderr, "tapegrad%s: stdout: could not write the results%s\n", sub.c_str(),
                 errno ? cat(" (", std::strerror(errno), ")").c_str() : "");
    return 1;
  }
  return 0;
}
