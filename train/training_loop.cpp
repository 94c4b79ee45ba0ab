#include "train/training_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <tuple>

#include "autograd/autograd.h"
#include "optim/clip.h"
#include "train/data/batching.h"
#include "train/parallel/data_parallel.h"
#include "train/evaluate.h"
#include "train/io/interrupt.h"
#include "train/report/metrics.h"
#include "train/report/progress.h"
#include "train/publish_run.h"
#include "train/run_on_ranks.h"

namespace tapegrad {

namespace fs = std::filesystem;

namespace {

/// The validation set's loss and accuracy, between two releases of the storage cache. Evaluation batches
/// have other shapes than training's, so the cache can hand them none of the buffers training left idle:
/// without the first release, evaluation's buffers would sit on top of training's (the medium model of
/// issue 7 peaked at 300 MB instead of training's 279 MB); without the second, evaluation's idle buffers
/// would sit under the next training steps. The cost is one step faulting its buffers in again.
/// With several ranks, each evaluates its share of the validation set (run_on_ranks.h).
Evaluation evaluate_validation_set(Run& run) {
  const TrainOptions& o = run.options;
  const int64_t max_tokens = evaluation_tokens(o.batch_size, o.context_length);
  release_cached_storage();
  Evaluation eval;
  try {
    eval = run.comm->size() > 1 ? validate_on_ranks(run, max_tokens)
                                : evaluate(*run.model, run.data.valid, run.data.vocab, run.data.labels, max_tokens);
  } catch (const NonFiniteOutput& e) {  // finite weights whose forward overflows: the run diverged
    throw diverged(run, run.step, e.what());
  }
  release_cached_storage();
  return eval;
}

/// Rank 0 writes the checkpoint; the other ranks first hand it what trainer.json keeps of them.
void publish(Run& run, bool is_best, double elapsed) {
  if (run.comm->size() > 1) gather_rank_state(run);
  if (run.comm->rank() == 0)
    publish_step(run, is_best, elapsed);
  else
    run.published_step = run.step;
}

/// The last validation among the rows, or nullptr (a row with a validation has a finite valid_accuracy).
const MetricsRow* last_validation(const std::vector<MetricsRow>& rows) {
  for (auto it = rows.rbegin(); it != rows.rend(); ++it)
    if (std::isfinite(it->valid_accuracy)) return &*it;
  return nullptr;
}

/// The command that continues the run, for the messages of a run that stops early.
std::string resume_command(const Run& run) {
  const int ranks = run.comm->size();
  return cat(ranks > 1 ? cat("mpirun -np ", ranks, " ") : "", "tapegrad train --resume ", run.options.out);
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

}  // namespace

// A function-try-block: an anomaly (--detect-anomaly) anywhere in the loop gets the step and the checkpoint
// left intact added to its message.
TrainSummary run_training_loop(Run& run, std::ostream& log) try {
  const TrainOptions& o = run.options;
  const bool cls = nn::prepends_cls(o.model);
  Communicator& comm = *run.comm;
  const bool data_parallel = comm.size() > 1;
  Progress progress(log);
  if (comm.rank() == 0) fs::create_directories(o.out);
  set_num_threads(o.threads > 0 ? o.threads : comm.default_threads());
  if (o.verbose) progress.compute(o.threads);
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
  double last_row_train_seconds = timing.train_seconds;
  Lap lap;
  double last_validation_seconds = 0;
  InterruptGuard interrupts;  // SIGINT and SIGTERM, from here until the loop ends
  const DetectAnomalyGuard anomaly_detection(o.detect_anomaly);

  run.model->train();
  while (run.step < run.total_steps) {
    // At a step boundary: save this step, then stop (every rank at the same step: they agreed on it).
    if (const int signal = data_parallel ? run.agreed_stop : interrupts.received()) {
      progress.clear();
      if (run.published_step != run.step) publish(run, false, seconds_now());
      throw Interrupted(signal, cat("interrupted by ", signal_name(signal), " at step ", run.step,
                                    ": checkpoint saved; continue with: ", resume_command(run)));
    }
    double loss_value = 0, auxiliary_value = 0;
    if (data_parallel) {
      std::tie(loss_value, auxiliary_value) = data_parallel_step(run, interrupts.received());
    } else {
      const Batch batch =
          make_batch(run.data.stream->next_batch(o.batch_size), run.data.vocab, run.data.labels, o.context_length, cls);
      run.truncated += batch.truncated;
      const Tensor logits = run.model->forward(batch.ids, batch.key_padding_mask);
      const Tensor task_loss = cross_entropy(logits, batch.targets);
      // Blocks with a training objective of their own (moe's load balancing) add it, already weighted; the
      // reported loss stays the task's, comparable with the validation loss.
      const Tensor auxiliary = run.model->auxiliary_loss();
      const Tensor loss = auxiliary.defined() ? task_loss + auxiliary : task_loss;
      run.optimizer->zero_grad();
      backward(loss);
      loss_value = task_loss.item();  // the one float a step reads back; rows average it
      if (auxiliary.defined()) auxiliary_value = auxiliary.item();
    }
    if (!std::isfinite(loss_value)) throw diverged(run, run.step + 1, cat("loss ", loss_value));
    if (!std::isfinite(auxiliary_value)) throw diverged(run, run.step + 1, cat("auxiliary loss ", auxiliary_value));
    if (o.clip_grad > 0) optim::clip_grad_norm(params, o.clip_grad);
    run.optimizer->set_lr(run.schedule.lr_at(run.step));
    run.optimizer->step();
    ++run.step;
    run.window_loss += loss_value;
    ++run.window_steps;

    const double rate = (run.step - first_step) / std::max(timing.train_seconds - train_seconds_before, 1e-9);
    progress.step(run.step, run.total_steps, loss_value, has_validation ? std::optional(last_accuracy) : std::nullopt,
                  rate, seconds_now());
    timing.train_seconds += lap.next();
    const bool validating = run.step % o.eval_every == 0 || run.step == run.total_steps;
    if (!validating && run.step % o.log_every != 0) continue;

    // A row: the mean training loss since the previous row, and the validation when there is one.
    const double nan = std::numeric_limits<double>::quiet_NaN();
    MetricsRow row{run.step,
                   run.data.stream->epoch(),
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

    // The last validation's time, or before the first an estimate: a forward costs about a third of a
    // training step, over valid / batch batches.
    const double step_seconds = timing.train_seconds / std::max<int64_t>(run.step - first_step, 1);
    const auto valid_count = static_cast<int64_t>(run.data.valid.size());
    progress.validating(run.step, run.total_steps, valid_count,
                        last_validation_seconds > 0 ? last_validation_seconds
                                                    : step_seconds / 3 * static_cast<double>(valid_count) /
                                                          static_cast<double>(o.batch_size));
    const Evaluation eval = evaluate_validation_set(run);
    last_validation_seconds = lap.next();
    timing.validation_seconds += last_validation_seconds;
    last_accuracy = row.valid_accuracy = eval.accuracy;
    last_loss = row.valid_loss = eval.loss;
    row.elapsed_seconds = seconds_now();
    run.metrics.push_back(row);
    has_validation = true;
    progress.validation(row, run.total_steps);

    const bool is_best = eval.accuracy > run.best_accuracy;
    if (is_best) {
      run.best_accuracy = eval.accuracy;
      run.best_loss = eval.loss;
      run.best_step = run.step;
    }
    const bool reached = o.target_acc > 0 && eval.accuracy >= o.target_acc;
    if (reached) run.total_steps = run.step;  // early stop: this checkpoint is the last
    publish(run, is_best, row.elapsed_seconds);
    timing.checkpoint_seconds += lap.next();
    if (reached) {
      summary.reached_target = true;
      break;
    }
  }
  // A signal during the last validation or checkpoint found the loop already ending: the checkpoint is whole,
  // but the run was interrupted, and its exit status says so (not "finished" and 0).
  if (const int signal = data_parallel ? run.agreed_stop : interrupts.received()) {
    progress.clear();
    throw Interrupted(signal, cat("interrupted by ", signal_name(signal), " during the last step, validation or ",
                                  "checkpoint: the run had finished all its ", run.step, " steps and the checkpoint of step ",
                                  run.published_step, " in ", o.out, " is complete"));
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
  summary.sample_text = run.data.valid.front().text;
  summary.ranks = comm.size();
  summary.global_batch = o.batch_size * comm.size();
  if (run.averager && run.step > first_step) {
    const double steps = static_cast<double>(run.step - first_step);
    summary.rank_wait_seconds_per_step = run.averager->rank_wait_seconds() / steps;
    summary.allreduce_seconds_per_step = run.averager->sum_seconds() / steps;
  }
  return summary;
} catch (const AnomalyError& e) {
  throw AnomalyError(cat(e.what(), "; stopped after step ", run.step, "; ", kept_checkpoint(run)));
} catch (const CommunicationError& e) {
  throw CommunicationError(cat(e.what(), "; stopped at step ", run.step, "; ", kept_checkpoint(run), ": continue with ",
                               resume_command(run)));
}


}  // namespace tapegrad
