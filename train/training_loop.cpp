#include "train/training_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>

#include "autograd/autograd.h"
#include "optim/clip.h"
#include "train/data/suggested_prompt.h"
#include "train/evaluate.h"
#include "train/io/interrupt.h"
#include "train/io/shell_command.h"
#include "train/publish_run.h"
#include "train/report/metrics.h"
#include "train/report/progress.h"
#include "train/run_on_ranks.h"
#include "train/training_step.h"

namespace tapegrad {

namespace fs = std::filesystem;

namespace {

/// The last validation among the rows, or nullptr (a row with a validation has a finite valid_accuracy).
const MetricsRow* last_validation(const std::vector<MetricsRow>& rows) {
  for (auto it = rows.rbegin(); it != rows.rend(); ++it)
    if (std::isfinite(it->valid_accuracy)) return &*it;
  return nullptr;
}

/// The command that continues the run, for the messages of a run that stops early.
std::string resume_command(const Run& run) {
  const int ranks = run.ranks.comm->size();
  return cat(ranks > 1 ? cat("mpirun -np ", ranks, " ") : "", suggested_command({"train", "--resume", run.options.out}));
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

/// One session of the loop over a run: the run's parts are the run's; this holds only what the session shows
/// and times (the clocks, the last validation, the rates since the session began).
class TrainingLoop {
 public:
  TrainingLoop(Run& run, std::ostream& log)
      : run_(run), p_(run.progress), progress_(log), first_step_(p_.step), train_seconds_before_(p_.timing.train_seconds),
        last_row_step_(p_.step), last_row_train_seconds_(p_.timing.train_seconds) {
    if (const MetricsRow* validated = last_validation(p_.metrics)) last_validation_ = *validated;
    if (run.data.tokenizer) progress_.show_language_model(run.data.valid_characters_per_token);
  }

  TrainSummary run() {
    const TrainOptions& o = run_.options;
    if (run_.ranks.comm->rank() == 0) fs::create_directories(o.out);
    set_num_threads(o.threads > 0 ? o.threads : run_.ranks.comm->default_threads());
    if (o.verbose) progress_.compute(o.threads);
    const DetectAnomalyGuard anomaly_detection(o.detect_anomaly);
    run_.model->module().train();
    bool reached = false;
    while (p_.step < p_.total_steps && !reached) {
      stop_if_signalled();
      step();
      const bool validating = p_.step % o.eval_every == 0 || p_.step == p_.total_steps;
      if (validating || p_.step % o.log_every == 0) reached = add_row(validating);
    }
    if (const int signal = stop_signal()) {  // during the last validation or checkpoint: the loop was ending
      progress_.clear();
      throw Interrupted(signal, cat("interrupted by ", signal_name(signal), " during the last step, validation or ",
                                    "checkpoint: the run had finished all its ", p_.step, " steps and the checkpoint of step ",
                                    p_.published_step, " in ", o.out, " is complete"));
    }
    return summary(reached);
  }

 private:
  /// A stop asked for by a signal: this process's, or on several ranks the one they agreed on.
  int stop_signal() const { return run_.ranks.several() ? run_.ranks.agreed_stop : interrupts_.received(); }

  /// At a step boundary: save this step, then stop (every rank at the same step: they agreed on it).
  void stop_if_signalled() {
    const int signal = stop_signal();
    if (!signal) return;
    progress_.clear();
    if (p_.published_step != p_.step) publish(false, now());
    throw Interrupted(signal, cat("interrupted by ", signal_name(signal), " at step ", p_.step,
                                  ": checkpoint saved; continue with: ", resume_command(run_)));
  }

  /// One optimizer step on the next batch.
  void step() {
    const TrainOptions& o = run_.options;
    const std::vector<Example> batch = run_.data.stream->next_batch(o.batch_size * run_.ranks.comm->size());
    const StepLosses losses = forward_backward(*run_.model, *run_.optimizer, batch, run_.ranks, interrupts_.received());
    p_.truncated += losses.truncated;
    if (!std::isfinite(losses.task)) throw diverged(run_, p_.step + 1, cat("loss ", losses.task));
    if (!std::isfinite(losses.auxiliary)) throw diverged(run_, p_.step + 1, cat("auxiliary loss ", losses.auxiliary));
    if (o.clip_grad > 0) optim::clip_grad_norm(run_.model->module().named_parameters(), o.clip_grad);
    run_.optimizer->set_lr(run_.schedule.lr_at(p_.step));
    run_.optimizer->step();
    ++p_.step;
    p_.window_loss += losses.task;
    ++p_.window_steps;
    const double rate = (p_.step - first_step_) / std::max(p_.timing.train_seconds - train_seconds_before_, 1e-9);
    progress_.step(p_.step, p_.total_steps, losses.task,
                   last_validation_ ? std::optional(last_validation_->valid_accuracy) : std::nullopt, rate, now());
    p_.timing.train_seconds += lap_.next();
  }

  /// A row: the mean training loss since the previous row, and with `validating` the validation, a checkpoint
  /// and the early stop. Returns whether the target accuracy was reached.
  bool add_row(bool validating) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    MetricsRow row{p_.step,
                   run_.data.stream->epoch(),
                   run_.optimizer->lr(),
                   p_.window_loss / p_.window_steps,
                   nan,
                   nan,
                   (p_.step - last_row_step_) / std::max(p_.timing.train_seconds - last_row_train_seconds_, 1e-9),
                   now()};
    last_row_step_ = p_.step;
    last_row_train_seconds_ = p_.timing.train_seconds;
    p_.window_loss = 0;
    p_.window_steps = 0;
    if (!validating) {  // reaches metrics.csv with the next checkpoint, so that files and checkpoints agree
      p_.metrics.push_back(row);
      return false;
    }
    const Evaluation eval = validate();
    row.valid_accuracy = eval.accuracy;
    row.valid_loss = eval.loss;
    row.elapsed_seconds = now();
    p_.metrics.push_back(row);
    last_validation_ = row;
    progress_.validation(row, p_.total_steps);

    // A language model's best is its lowest validation loss (perplexity); a classifier's its highest accuracy.
    const bool first = p_.best_accuracy < 0;
    const bool is_best = run_.data.tokenizer ? first || eval.loss < p_.best_loss : eval.accuracy > p_.best_accuracy;
    if (is_best) {
      p_.best_accuracy = eval.accuracy;
      p_.best_loss = eval.loss;
      p_.best_step = p_.step;
    }
    const double target = run_.options.target_acc;
    const bool reached = target > 0 && eval.accuracy >= target;
    if (reached) p_.total_steps = p_.step;  // early stop: this checkpoint is the last
    publish(is_best, row.elapsed_seconds);
    p_.timing.checkpoint_seconds += lap_.next();
    return reached;
  }

  /// The validation set's loss and accuracy, between two releases of the storage cache. Evaluation batches
  /// have other shapes than training's, so the cache can hand them none of the buffers training left idle:
  /// without the first release, evaluation's buffers would sit on top of training's (the medium model of
  /// issue 7 peaked at 300 MB instead of training's 279 MB); without the second, evaluation's idle buffers
  /// would sit under the next training steps. The cost is one step faulting its buffers in again.
  Evaluation validate() {
    const TrainOptions& o = run_.options;
    // The last validation's time, or before the first an estimate: a forward costs about a third of a
    // training step, over valid / batch batches.
    const double step_seconds = p_.timing.train_seconds / std::max<int64_t>(p_.step - first_step_, 1);
    const auto valid_count = static_cast<int64_t>(run_.data.valid.size());
    progress_.validating(p_.step, p_.total_steps, valid_count,
                         last_validation_seconds_ > 0 ? last_validation_seconds_
                                                      : step_seconds / 3 * static_cast<double>(valid_count) /
                                                            static_cast<double>(o.batch_size));
    release_cached_storage();
    Evaluation eval;
    try {
      eval = evaluate_on_ranks(*run_.model, run_.data.valid, run_.ranks,
                               evaluation_tokens(o.batch_size, o.context_length));
    } catch (const NonFiniteOutput& e) {  // finite weights whose forward overflows: the run diverged
      throw diverged(run_, p_.step, e.what());
    }
    release_cached_storage();
    last_validation_seconds_ = lap_.next();
    p_.timing.validation_seconds += last_validation_seconds_;
    return eval;
  }

  /// Rank 0 writes the checkpoint; the other ranks first hand it what trainer.json keeps of them.
  void publish(bool is_best, double elapsed) {
    if (run_.ranks.several()) gather_rank_state(run_);
    if (run_.ranks.comm->rank() == 0)
      publish_step(run_, is_best, elapsed);
    else
      p_.published_step = p_.step;
  }

  /// The run's wall-clock seconds so far, every session.
  double now() const {
    return p_.elapsed_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }

  TrainSummary summary(bool reached) const {
    TrainSummary s;
    s.parameters = run_.model->module().parameter_count();
    s.reached_target = reached;
    s.steps = p_.step;
    s.seconds = now();
    s.train_seconds = p_.timing.train_seconds;
    s.validation_seconds = p_.timing.validation_seconds;
    s.checkpoint_seconds = p_.timing.checkpoint_seconds;
    s.train_steps_per_second = p_.step / std::max(p_.timing.train_seconds, 1e-9);
    s.final_accuracy = last_validation_ ? last_validation_->valid_accuracy : 0;
    s.final_loss = last_validation_ ? last_validation_->valid_loss : 0;
    s.best_accuracy = std::max(p_.best_accuracy, 0.0);
    s.best_loss = p_.best_loss;
    s.best_step = p_.best_step;
    s.truncated = p_.truncated;
    s.out = run_.options.out;
    s.sample_text = run_.data.valid.front().text;
    if (run_.data.tokenizer) {  // a prompt: the first tokens of the validation text
      s.sample_text = suggested_prompt(*run_.data.tokenizer, run_.data.valid.front().tokens, run_.options.context_length);
      s.language_model = true;
      s.final_bits_per_character = s.final_loss / std::log(2.0) / run_.data.valid_characters_per_token;
    }
    s.ranks = run_.ranks.comm->size();
    s.global_batch = run_.options.batch_size * s.ranks;
    if (run_.ranks.averager && p_.step > first_step_) {
      const double steps = static_cast<double>(p_.step - first_step_);
      s.rank_wait_seconds_per_step = run_.ranks.averager->rank_wait_seconds() / steps;
      s.allreduce_seconds_per_step = run_.ranks.averager->sum_seconds() / steps;
    }
    return s;
  }

  Run& run_;
  RunProgress& p_;
  Progress progress_;
  InterruptGuard interrupts_;  // SIGINT and SIGTERM, while the loop lives
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  const int64_t first_step_;
  const double train_seconds_before_;
  int64_t last_row_step_;
  double last_row_train_seconds_;
  std::optional<MetricsRow> last_validation_;  // shown in the progress line, reported at the end
  Lap lap_;
  double last_validation_seconds_ = 0;
};

}  // namespace

// A function-try-block: an anomaly (--detect-anomaly) anywhere in the loop gets the step and the checkpoint
// left intact added to its message.
TrainSummary run_training_loop(Run& run, std::ostream& log) try {
  return TrainingLoop(run, log).run();
} catch (const AnomalyError& e) {
  throw AnomalyError(cat(e.what(), "; stopped after step ", run.progress.step, "; ", kept_checkpoint(run)));
} catch (const CommunicationError& e) {
  throw CommunicationError(cat(e.what(), "; stopped at step ", run.progress.step, "; ", kept_checkpoint(run),
                               ": continue with ", resume_command(run)));
}

}  // namespace tapegrad
