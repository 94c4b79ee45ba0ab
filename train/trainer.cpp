#include "train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <ostream>

#include "autograd/autograd.h"
#include "autograd/blas.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
#include "train/batching.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/interrupt.h"
#include "train/metrics.h"
#include "train/curves.h"
#include "train/read_file.h"
#include "train/run_lock.h"
#include "train/safetensors.h"
#include "train/strict_json.h"
#include "train/training_stream.h"
#include "train/tsv.h"

namespace tapegrad {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int64_t kDefaultSteps = 2000;
constexpr uint64_t kDropoutStream = 0x64726f706f7574ULL;

int64_t longest_sequence(const std::vector<Example>& examples) {
  int64_t longest = 1;
  for (const Example& e : examples) longest = std::max<int64_t>(longest, static_cast<int64_t>(split_words(e.text).size()));
  return longest;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainOptions& o, const nn::NamedTensors& params) {
  if (o.optimizer == "sgd") return std::make_unique<optim::SGD>(params, optim::SgdOptions{o.lr, o.momentum, 0, false, o.weight_decay});
  if (o.optimizer == "adam") return std::make_unique<optim::Adam>(params, optim::AdamOptions{o.lr, 0.9, 0.999, 1e-8, o.weight_decay});
  if (o.optimizer == "adamw") return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{o.lr, 0.9, 0.999, 1e-8, o.weight_decay});
  throw ValueError(cat("--optimizer: '", o.optimizer, "' is not one of sgd, adam, adamw"));
}

/// Where a run's wall-clock time went (see TrainSummary).
struct RunTiming {
  double train_seconds = 0, validation_seconds = 0, checkpoint_seconds = 0;
};

json to_json(const RunTiming& t) {
  return {{"train_seconds", t.train_seconds},
          {"validation_seconds", t.validation_seconds},
          {"checkpoint_seconds", t.checkpoint_seconds}};
}

/// One training run's whole state: what trainer.json and the checkpoint files hold.
struct Run {
  TrainOptions options;
  Vocab vocab;
  std::vector<std::string> labels;
  std::vector<Example> valid;
  std::unique_ptr<TrainingStream> stream;
  std::unique_ptr<nn::SequenceClassifier> model;
  std::shared_ptr<Generator> dropout_rng;
  std::unique_ptr<optim::Optimizer> optimizer;
  optim::LrSchedule schedule;
  std::vector<MetricsRow> metrics;
  int64_t step = 0, total_steps = 0, truncated = 0, best_step = 0;
  int64_t published_step = -1;  // the step of the checkpoint `latest` points at; -1: none yet
  double best_accuracy = -1, best_loss = 0, elapsed_before = 0;  // elapsed_before: seconds of earlier sessions
  double window_loss = 0;                                           // training loss summed since the last row
  int64_t window_steps = 0;
  RunTiming timing;                                                 // all sessions, up to the last checkpoint
  json data = json::object();  // the --data (and --valid) files' fingerprints, and whether they were pipes

  /// trainer.json; `elapsed` is the run's wall-clock time so far (all sessions).
  json trainer_state(double elapsed) const {
    return {{"format", "tapegrad-trainer-1"},
            {"step", step},
            {"total_steps", total_steps},
            {"epoch", stream->epoch()},
            {"options", to_json(options)},
            {"schedule",
             {{"kind", optim::schedule_name(schedule.kind)}, {"base_lr", schedule.base_lr},
              {"warmup_steps", schedule.warmup_steps}, {"total_steps", schedule.total_steps}, {"min_lr", schedule.min_lr}}},
            {"rng", {{"data", stream->state()}, {"dropout", to_json(dropout_rng->state())}}},
            {"best", {{"accuracy", best_accuracy}, {"loss", best_loss}, {"step", best_step}}},
            {"elapsed_seconds", elapsed},
            {"timing", to_json(timing)},
            {"truncated", truncated},
            {"data", data},
            {"window", {{"loss", window_loss}, {"steps", window_steps}}}};
  }
};

/// A fingerprint of labelled examples as read (FNV-1a over labels and texts, 16 hex digits): trainer.json
/// keeps it, and --resume goes on only with the data the run started with, whatever path or pipe brings it.
std::string fingerprint(const std::vector<Example>& examples) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  const auto mix = [&hash](std::string_view bytes, char end) {
    for (char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
    hash = (hash ^ static_cast<unsigned char>(end)) * 0x100000001b3ULL;
  };
  for (const Example& e : examples) {
    mix(e.label, '\t');
    mix(e.text, '\n');
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

bool is_pipe(const std::string& path) {
  std::error_code ec;
  return fs::is_fifo(path, ec) || fs::is_socket(path, ec);
}

/// Builds data, vocabulary and labels for the options (fills in vocab_size, num_classes, context_length).
/// Each data file is read exactly once here, so that `--data <(command)` works.
void setup_data(Run& run, const Vocab* fixed_vocab) {
  TrainOptions& o = run.options;
  const bool cls = nn::prepends_cls(o.model);
  int64_t longest = 0;
  if (o.data.empty()) {
    TaskStream probe(o.task, o.seed);
    run.labels = probe.labels();
    run.vocab = fixed_vocab ? *fixed_vocab : Vocab::build(probe.all_words());
    run.valid = validation_set(o.task, o.seed);
    if (o.train_size > 0) {
      run.stream = std::make_unique<TrainingStream>(TaskStream(o.task, o.seed).take(o.train_size), o.shuffle, o.seed);
    } else {
      if (o.epochs > 0) throw ValueError("--epochs needs a fixed training set: give --data or --train-size");
      run.stream = std::make_unique<TrainingStream>(o.task, o.seed);
    }
    longest = o.task.max_len;
  } else {
    std::vector<Example> train = read_tsv(o.data).examples;
    run.data = {{"fingerprint", fingerprint(train)}, {"pipe", is_pipe(o.data)}};
    if (o.valid.empty()) {
      Split parts = split(train, o.valid_fraction, o.seed);
      train = std::move(parts.train);
      run.valid = std::move(parts.valid);
    } else {
      run.valid = read_tsv(o.valid).examples;
      run.data["valid_fingerprint"] = fingerprint(run.valid);
      run.data["valid_pipe"] = is_pipe(o.valid);
    }
    if (train.empty())
      throw ValueError(cat(o.data, ": no training examples left after the validation split (",
                           run.valid.size(), " held out); give more data or --valid"));
    run.labels = sorted_labels(train);
    if (run.labels.size() < 2)
      throw ValueError(cat(o.data, ": every training example has the label '", run.labels.front(),
                           "'; a classifier needs at least two classes"));
    for (const Example& e : run.valid)
      if (!std::binary_search(run.labels.begin(), run.labels.end(), e.label))
        throw ValueError(cat(o.valid.empty() ? o.data : o.valid, ": validation label '", e.label,
                             "' does not occur in the training data"));
    std::vector<std::string> texts;
    for (const Example& e : train) texts.push_back(e.text);
    run.vocab = fixed_vocab ? *fixed_vocab : Vocab::build(texts);
    longest = longest_sequence(train);
    run.stream = std::make_unique<TrainingStream>(std::move(train), o.shuffle, o.seed);
  }
  if (o.context_length <= 0) o.context_length = longest + (cls ? 1 : 0);
  o.model.vocab_size = run.vocab.size();
  o.model.num_classes = static_cast<int64_t>(run.labels.size());
  o.model.context_length = o.context_length;
  o.model.pad_id = Vocab::kPad;
  if (run.valid.empty()) throw ValueError("no validation examples: give --valid or a larger --valid-fraction");
}

/// Bytes a training step needs, roughly: float32 weights, gradients and two Adam moments (16 bytes a
/// parameter), and what a step keeps for backward: per layer about 16 floats per position and model
/// dimension (attention's inputs and outputs, layer norms, residuals), 3 per position and feed-forward
/// dimension, and the (B, H, T, T) attention weights twice. It errs high: 641 MiB for the medium model of
/// docs/performance.md, whose training peaks at 314 MiB. It is only meant to refuse, before allocating any
/// of it, what cannot fit.
double training_memory_bytes(const TrainOptions& o) {
  const nn::ClassifierOptions& m = o.model;
  const double B = o.batch_size, T = m.context_length, C = m.d_model, F = m.d_ff, H = m.n_heads;
  const double per_layer = B * T * (16 * C + 3 * F) + 2 * B * H * T * T;
  return 16 * static_cast<double>(nn::parameter_count(m)) + 4 * (m.n_layers * per_layer + 4 * B * T * C);
}

/// Refuses a run whose memory would exceed the machine's, saying how much it would need.
void check_memory(const TrainOptions& o) {
  const double needed = training_memory_bytes(o);
  const double machine = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (machine > 0 && needed > machine) {
    constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
    char line[320];
    std::snprintf(line, sizeof line,
                  "this model needs about %.1f GiB to train (%.3g parameters, batch %lld x context %lld), more than "
                  "this machine's %.1f GiB of memory; lower --batch-size, --context-length, --d-model, --ff or --layers",
                  needed / GiB, static_cast<double>(nn::parameter_count(o.model)), static_cast<long long>(o.batch_size),
                  static_cast<long long>(o.model.context_length), machine / GiB);
    throw ValueError(line);
  }
}

void setup_training(Run& run) {
  TrainOptions& o = run.options;
  if (o.epochs > 0) {
    const int64_t per_epoch = (run.stream->size() + o.batch_size - 1) / o.batch_size;
    run.total_steps = o.epochs * per_epoch;
  } else {
    run.total_steps = o.steps > 0 ? o.steps : kDefaultSteps;
  }
  run.optimizer = make_optimizer(o, run.model->named_parameters());
  run.schedule = {optim::parse_schedule(o.schedule), o.lr, o.warmup, std::max(run.total_steps, o.warmup + 1), 0};
  run.schedule.lr_at(0);  // validates the schedule before any work
}

/// What a run that stops early leaves behind, for its last message.
std::string kept_checkpoint(const Run& run) {
  if (run.published_step < 0) return cat("no checkpoint was saved yet in ", run.options.out);
  return cat("the checkpoint of step ", run.published_step, " in ", run.options.out, " is intact");
}

/// The error that stops a run whose numbers stopped being finite at `step` (`what` says which).
ValueError diverged(const Run& run, int64_t step, const std::string& what) {
  const std::string kept = run.published_step < 0
                               ? cat("no checkpoint was saved in ", run.options.out)
                               : cat("the last good checkpoint (step ", run.published_step, ") is kept in ", run.options.out);
  return ValueError(cat("training diverged at step ", step, " (", what, "): stopped; ", kept, "; lower --lr or set --clip-grad ",
                        "(--detect-anomaly names the op that made the first NaN or Inf)"));
}

/// Writes metrics.csv, curves.svg and a checkpoint of this step, and publishes it as `latest` (and `best`).
/// Weights that are not finite are never published; a failed write says which file, why, and which
/// checkpoint is still intact (the folder being written is removed, the links never moved).
void save_checkpoint(Run& run, bool is_best, double elapsed) {
  const TrainOptions& o = run.options;
  if (const std::string bad = first_non_finite(run.model->named_parameters()); !bad.empty())
    throw diverged(run, run.step, cat("parameter ", bad, " after the update"));
  try {
    // metrics.csv first: a kill before the publish leaves rows that resume drops (it keeps the rows up
    // to the checkpoint's step); the other order would lose them for good.
    write_metrics_csv(o.out + "/metrics.csv", run.metrics);
    write_curves_svg(o.out + "/curves.svg", run.metrics, "tapegrad: " + (o.data.empty() ? o.task.name : o.data));
    CheckpointContents contents{run.model.get(), &run.vocab, &run.labels, run.optimizer.get(), run.trainer_state(elapsed)};
    publish_checkpoint(o.out, run.step, contents, is_best);
  } catch (const IOError& e) {
    throw IOError(cat(e.what(), "; ", kept_checkpoint(run)));
  } catch (const std::filesystem::filesystem_error& e) {  // the links and folders of publish_checkpoint
    throw IOError(cat(e.what(), "; ", kept_checkpoint(run)));
  }
  run.published_step = run.step;
}

/// The validation set's loss and accuracy, between two releases of the storage cache. Evaluation batches
/// have other shapes than training's, so the cache can hand them none of the buffers training left idle:
/// without the first release, evaluation's buffers would sit on top of training's (the medium model of
/// issue 7 peaked at 300 MB instead of training's 279 MB); without the second, evaluation's idle buffers
/// would sit under the next training steps. The cost is one step faulting its buffers in again.
Evaluation validate(Run& run) {
  const TrainOptions& o = run.options;
  release_cached_storage();
  Evaluation eval = evaluate(*run.model, run.valid, run.vocab, run.labels, evaluation_tokens(o.batch_size, o.context_length));
  release_cached_storage();
  return eval;
}

/// The last validation among the rows, or nullptr (a row with a validation has a finite valid_accuracy).
const MetricsRow* last_validation(const std::vector<MetricsRow>& rows) {
  for (auto it = rows.rbegin(); it != rows.rend(); ++it)
    if (std::isfinite(it->valid_accuracy)) return &*it;
  return nullptr;
}

/// Wall-clock seconds since it was made or last asked, so that the loop can charge every moment to exactly
/// one of training, validation and checkpoints.
class Lap {
 public:
  double next() {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - mark_).count();
    mark_ = now;
    return seconds;
  }

 private:
  std::chrono::steady_clock::time_point mark_ = std::chrono::steady_clock::now();
};

// A function-try-block: an anomaly (--detect-anomaly) anywhere in the loop gets the step and the checkpoint
// left intact added to its message.
TrainSummary loop(Run& run, std::ostream& log) try {
  const TrainOptions& o = run.options;
  const bool cls = nn::prepends_cls(o.model);
  const bool live = ::isatty(STDERR_FILENO);
  fs::create_directories(o.out);
  set_num_threads(o.threads);
  if (o.verbose) {
    const BlasInfo blas = blas_info();
    log << "compute: " << num_threads() << (num_threads() == 1 ? " thread" : " threads")
        << (o.threads == 0 ? " (every core)" : "") << "; BLAS " << blas.library << ", kernels " << blas.kernels << " ("
        << blas.how_chosen << ")\n";
    if (!blas.advice.empty()) log << "advice: " << blas.advice << "\n";
  }
  const auto started = std::chrono::steady_clock::now();
  auto seconds_now = [&] {
    return run.elapsed_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  const auto params = run.model->named_parameters();
  TrainSummary summary;
  summary.parameters = run.model->parameter_count();
  RunTiming& timing = run.timing;
  const int64_t first_step = run.step;
  const double train_seconds_before = timing.train_seconds;
  const MetricsRow* validated = last_validation(run.metrics);
  bool has_validation = validated != nullptr;
  double last_accuracy = validated ? validated->valid_accuracy : 0, last_loss = validated ? validated->valid_loss : 0;
  int64_t last_row_step = run.step;
  double last_row_train_seconds = timing.train_seconds, last_progress = 0;
  Lap lap;
  InterruptGuard interrupts;  // SIGINT and SIGTERM, from here until the loop ends
  const DetectAnomalyGuard anomaly_detection(o.detect_anomaly);

  run.model->train();
  while (run.step < run.total_steps) {
    if (const int signal = interrupts.received()) {  // at a step boundary: save this step, then stop
      if (live) log << "\r\033[K" << std::flush;
      if (run.published_step != run.step) save_checkpoint(run, false, seconds_now());
      throw Interrupted(signal, cat("interrupted by ", signal_name(signal), " at step ", run.step,
                                    ": checkpoint saved; continue with: tapegrad train --resume ", o.out));
    }
    const Batch batch = make_batch(run.stream->next_batch(o.batch_size), run.vocab, run.labels, o.context_length, cls);
    run.truncated += batch.truncated;
    const Tensor logits = run.model->forward(batch.ids, batch.key_padding_mask);
    const Tensor loss = cross_entropy(logits, batch.targets);
    run.optimizer->zero_grad();
    backward(loss);
    const double loss_value = loss.item();  // the one float a step reads back; rows average it
    if (!std::isfinite(loss_value)) throw diverged(run, run.step + 1, cat("loss ", loss_value));
    if (o.clip_grad > 0) optim::clip_grad_norm(params, o.clip_grad);
    run.optimizer->set_lr(run.schedule.lr_at(run.step));
    run.optimizer->step();
    ++run.step;
    run.window_loss += loss_value;
    ++run.window_steps;

    const double rate = (run.step - first_step) / std::max(timing.train_seconds - train_seconds_before, 1e-9);
    if (live && seconds_now() - last_progress >= 0.1) {  // redraw the progress line at most ten times a second
      last_progress = seconds_now();
      char line[160];
      std::snprintf(line, sizeof line, "\rstep %lld/%lld  loss %.4f  val acc %s  %.0f steps/s  ETA %s   ",
                    static_cast<long long>(run.step), static_cast<long long>(run.total_steps), loss_value,
                    has_validation ? (std::to_string(last_accuracy * 100).substr(0, 5) + "%").c_str() : "-", rate,
                    format_duration((run.total_steps - run.step) / rate).c_str());
      log << line << std::flush;
    }
    timing.train_seconds += lap.next();
    const bool validating = run.step % o.eval_every == 0 || run.step == run.total_steps;
    if (!validating && run.step % o.log_every != 0) continue;

    // A row: the mean training loss since the previous row, and the validation when there is one.
    const double nan = std::numeric_limits<double>::quiet_NaN();
    MetricsRow row{run.step,
                   run.stream->epoch(),
                   run.optimizer->lr(),
                   run.window_loss / run.window_steps,
                   nan,
                   nan,
                   (run.step - last_row_step) / std::max(timing.train_seconds - last_row_train_seconds, 1e-9),
                   seconds_now()};
    last_row_step = run.step;
    last_row_train_seconds = timing.train_seconds;
    run.window_loss = 0;
    run.window_steps = 0;
    if (!validating) {  // reaches metrics.csv with the next checkpoint, so that files and checkpoints agree
      run.metrics.push_back(row);
      continue;
    }

    const Evaluation eval = validate(run);
    timing.validation_seconds += lap.next();
    last_accuracy = row.valid_accuracy = eval.accuracy;
    last_loss = row.valid_loss = eval.loss;
    row.elapsed_seconds = seconds_now();
    run.metrics.push_back(row);
    has_validation = true;
    if (live) log << "\r\033[K";
    char line[256];
    std::snprintf(line, sizeof line,
                  "step %lld/%lld  epoch %lld  lr %.2e  loss %.4f  val loss %.4f  val acc %.2f%%  %.1f steps/s  %s\n",
                  static_cast<long long>(run.step), static_cast<long long>(run.total_steps),
                  static_cast<long long>(row.epoch), row.lr, row.train_loss, row.valid_loss, 100 * row.valid_accuracy,
                  row.steps_per_second, format_duration(row.elapsed_seconds).c_str());
    log << line << std::flush;

    const bool is_best = eval.accuracy > run.best_accuracy;
    if (is_best) {
      run.best_accuracy = eval.accuracy;
      run.best_loss = eval.loss;
      run.best_step = run.step;
    }
    const bool reached = o.target_acc > 0 && eval.accuracy >= o.target_acc;
    if (reached) run.total_steps = run.step;  // early stop: this checkpoint is the last
    save_checkpoint(run, is_best, row.elapsed_seconds);
    timing.checkpoint_seconds += lap.next();
    if (reached) {
      summary.reached_target = true;
      break;
    }
  }
  summary.steps = run.step;
  summary.seconds = seconds_now();
  summary.train_seconds = timing.train_seconds;
  summary.validation_seconds = timing.validation_seconds;
  summary.checkpoint_seconds = timing.checkpoint_seconds;
  summary.train_steps_per_second = run.step / std::max(timing.train_seconds, 1e-9);
  summary.final_accuracy = last_accuracy;
  summary.final_loss = last_loss;
  summary.best_accuracy = std::max(run.best_accuracy, 0.0);
  summary.best_loss = run.best_loss;
  summary.best_step = run.best_step;
  summary.truncated = run.truncated;
  summary.out = o.out;
  summary.sample_text = run.valid.front().text;
  return summary;
} catch (const AnomalyError& e) {
  throw AnomalyError(cat(e.what(), "; stopped after step ", run.step, "; ", kept_checkpoint(run)));
}

}  // namespace

json to_json(const TrainSummary& s) {
  return {{"steps", s.steps},
          {"seconds", s.seconds},
          {"train_seconds", s.train_seconds},
          {"validation_seconds", s.validation_seconds},
          {"checkpoint_seconds", s.checkpoint_seconds},
          {"train_steps_per_second", s.train_steps_per_second},
          {"final_valid_accuracy", s.final_accuracy},
          {"final_valid_loss", s.final_loss},
          {"best_valid_accuracy", s.best_accuracy},
          {"best_valid_loss", s.best_loss},
          {"best_step", s.best_step},
          {"reached_target", s.reached_target},
          {"parameters", s.parameters},
          {"truncated", s.truncated},
          {"out", s.out}};
}

TrainSummary train(const TrainOptions& options, std::ostream& log) {
  validate(options);
  Run run;
  run.options = options;
  // Paths are saved absolute in trainer.json, so --resume works from any working directory.
  for (std::string* path : {&run.options.data, &run.options.valid, &run.options.init})
    if (!path->empty()) *path = fs::absolute(*path).lexically_normal().string();
  std::optional<LoadedModel> init;
  if (!options.init.empty()) {
    init = load_model(options.init);
    run.options.model = init->options;
    run.options.context_length = init->options.context_length;
  }
  setup_data(run, init ? &init->vocab : nullptr);
  check_memory(run.options);
  if (init && init->labels != run.labels)
    throw ValueError(cat("--init ", options.init, ": its labels differ from the data's (", init->labels.size(), " vs ",
                         run.labels.size(), "); fine-tuning needs the same label set"));
  Generator init_gen(run.options.seed);
  run.dropout_rng = std::make_shared<Generator>(run.options.seed ^ kDropoutStream);
  run.model = std::make_unique<nn::SequenceClassifier>(run.options.model, init_gen, run.dropout_rng);
  if (init) run.model->load_state_dict(init->model->state_dict());
  setup_training(run);
  // The lock before anything in --out is written or removed, and before the check below, so that a second
  // trainer hears that the directory is in use rather than advice to resume it.
  const RunLock lock(options.out, "--out");
  const fs::path out(options.out);
  if (!options.overwrite && (fs::exists(out / "trainer.json") || fs::is_symlink(out / "latest")))
    throw ValueError(cat("--out ", options.out, " already holds a training run: --resume it, choose another --out, ",
                         "or pass --overwrite to replace it"));
  std::error_code ignored;
  fs::remove(run.options.out + "/metrics.csv", ignored);
  log << "training " << run.model->parameter_count() << " parameters on "
      << (run.options.data.empty() ? "task " + run.options.task.name : run.options.data) << " for "
      << run.total_steps << " steps (batch " << run.options.batch_size << ", context " << run.options.context_length
      << ", " << run.vocab.size() << " tokens, " << run.labels.size() << " classes) into " << run.options.out << "\n";
  return loop(run, log);
}

json read_trainer_state(const std::string& path) {
  // Its deepest containers are the RNG states' word arrays, four levels below the top.
  constexpr int kMaxDepth = 8;
  return parse_json_strictly(read_whole_file(path, kJsonFileLimit), path, kMaxDepth);
}

TrainSummary resume(const std::string& dir, const ResumeOptions& options, std::ostream& log) {
  if (options.steps < 0) throw ValueError(cat("--steps must be positive, got ", options.steps));
  const std::string state_path = dir + "/trainer.json";
  std::error_code ec;
  if (!fs::exists(state_path, ec)) throw IOError(cat(state_path, ": not found (is ", dir, " a tapegrad run directory?)"));
  const json state = read_trainer_state(state_path);
  const RunLock lock(dir, "--resume");  // released when this run ends, however it ends
  Run run;
  try {
    run.options = train_options_from_json(state.at("options"), state_path);
    run.options.out = dir;
    run.options.verbose = options.verbose;
    run.options.detect_anomaly = options.detect_anomaly;
    if (options.threads >= 0) run.options.threads = options.threads;
    // The data may come from another path (as it must after a pipe), never with other examples.
    const json saved_data = state.value("data", json::object());
    const auto relocate = [&](const std::string& given, std::string& saved, const char* flag, const char* pipe_key) {
      if (!given.empty()) {
        if (saved.empty()) throw ValueError(cat("--resume: ", dir, " was started without ", flag, "; a resumed run keeps its data"));
        saved = fs::absolute(given).lexically_normal().string();
      } else if (saved_data.value(pipe_key, false)) {
        throw ValueError(cat("--resume: the run read ", flag, " from a pipe (", saved,
                             "), which cannot be read again: give the same data with ", flag));
      }
    };
    relocate(options.data, run.options.data, "--data", "pipe");
    relocate(options.valid, run.options.valid, "--valid", "valid_pipe");
    try {
      validate(run.options);
    } catch (const ValueError& e) {
      throw IOError(cat(state_path, ": the saved options are invalid: ", e.what()));
    }
    const LoadedModel saved = load_model(dir);
    setup_data(run, &saved.vocab);
    const auto require_same_examples = [&](const char* key, const std::string& path) {
      if (saved_data.contains(key) && run.data.value(key, std::string()) != saved_data.at(key))
        throw ValueError(cat("--resume: ", path, " holds other examples than the run started with (fingerprint ",
                             run.data.value(key, std::string()), ", saved ", saved_data.at(key).get<std::string>(),
                             "); resuming needs the same data"));
    };
    require_same_examples("fingerprint", run.options.data);
    require_same_examples("valid_fingerprint", run.options.valid);
    run.dropout_rng = std::make_shared<Generator>(0);
    Generator unused(0);
    run.model = std::make_unique<nn::SequenceClassifier>(run.options.model, unused, run.dropout_rng);
    run.model->load_state_dict(saved.model->state_dict());
    setup_training(run);
    load_optimizer_state(*run.optimizer, dir + "/optimizer.safetensors");
    run.step = state.at("step").get<int64_t>();
    run.published_step = run.step;
    run.total_steps = options.steps > 0 ? options.steps : state.at("total_steps").get<int64_t>();
    if (options.steps > 0 && options.steps <= run.step)
      throw ValueError(cat("--steps ", options.steps, " is not more than the ", run.step, " steps ", dir, " has done"));
    const json& s = state.at("schedule");
    run.schedule = {optim::parse_schedule(s.at("kind").get<std::string>()), s.at("base_lr").get<double>(),
                    s.at("warmup_steps").get<int64_t>(), s.at("total_steps").get<int64_t>(), s.at("min_lr").get<double>()};
    // A new total stretches the decay over it, as setup_training would have (else a cosine or linear
    // schedule sits at min_lr for every added step).
    if (options.steps > 0) run.schedule.total_steps = std::max(run.total_steps, run.schedule.warmup_steps + 1);
    run.stream->set_state(state.at("rng").at("data"));
    run.dropout_rng->set_state(generator_state(state.at("rng").at("dropout")));
    run.best_accuracy = state.at("best").at("accuracy").get<double>();
    run.best_loss = state.at("best").at("loss").get<double>();
    run.best_step = state.at("best").at("step").get<int64_t>();
    run.elapsed_before = state.at("elapsed_seconds").get<double>();
    if (state.contains("timing")) {
      const json& t = state.at("timing");
      run.timing = {t.at("train_seconds").get<double>(), t.at("validation_seconds").get<double>(),
                    t.at("checkpoint_seconds").get<double>()};
    } else {  // a run from before the split: all its time counts as training
      run.timing.train_seconds = run.elapsed_before;
    }
    run.truncated = state.at("truncated").get<int64_t>();
    run.window_loss = state.at("window").at("loss").get<double>();
    run.window_steps = state.at("window").at("steps").get<int64_t>();
  } catch (const json::exception& e) {
    throw IOError(cat(state_path, ": malformed trainer state (", e.what(), ")"));
  }
  if (fs::exists(dir + "/metrics.csv")) {
    for (const MetricsRow& row : read_metrics_csv(dir + "/metrics.csv"))
      if (row.step <= run.step) run.metrics.push_back(row);
  }
  log << "resuming " << dir << " at step " << run.step << " of " << run.total_steps << "\n";
  return loop(run, log);
}

}  // namespace tapegrad
