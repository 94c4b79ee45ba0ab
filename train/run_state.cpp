#include "train/run_state.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "train/io/read_file.h"
#include "train/io/strict_json.h"

namespace tapegrad {

using nlohmann::json;

namespace {

/// trainer.json's schedule is the one its options make (set_up_training: the rate, warm-up and schedule are
/// not flags of --resume): one that differs was edited, and would train at rates nobody chose (a negative
/// base_lr, a min_lr above it, a rate float32 cannot hold). Its total is the last one set (a run stopped
/// early by --target-acc keeps the total it decays over). IOError naming the key.
optim::LrSchedule saved_schedule(const json& saved, const optim::LrSchedule& options, const std::string& path) {
  const auto require = [&](const char* key, const json& value) {
    if (saved.at(key) != value)
      throw IOError(cat(path, ": 'schedule.", key, "' is ", saved.at(key).dump(), ", but the run's options make it ",
                        value.dump(), ": the file was edited"));
  };
  require("kind", options.kind);
  require("base_lr", options.base_lr);
  require("warmup_steps", options.warmup_steps);
  require("min_lr", options.min_lr);
  optim::LrSchedule schedule = options;
  schedule.total_steps = saved.at("total_steps").get<int64_t>();
  if (schedule.total_steps <= schedule.warmup_steps || schedule.total_steps > kMaxSteps)
    throw IOError(cat(path, ": 'schedule.total_steps' is ", schedule.total_steps, ", outside [warmup_steps + 1 = ",
                      schedule.warmup_steps + 1, ", ", kMaxSteps, "]"));
  return schedule;
}

json to_json(const RunTiming& t) {
  return {{"train_seconds", t.train_seconds},
          {"validation_seconds", t.validation_seconds},
          {"checkpoint_seconds", t.checkpoint_seconds}};
}

}  // namespace

json Run::trainer_state(double elapsed) const {
  json state = {{"format", kTrainerFormat},
                {"step", progress.step},
                {"total_steps", progress.total_steps},
                {"epoch", data.stream->epoch()},
                {"options", to_json(options)},
                {"schedule",
                 {{"kind", schedule.kind},
                  {"base_lr", schedule.base_lr},
                  {"warmup_steps", schedule.warmup_steps},
                  {"total_steps", schedule.total_steps},
                  {"min_lr", schedule.min_lr}}},
                {"rng", {{"data", data.stream->state()}, {"dropout", to_json(dropout_rng->state())}}},
                {"best", {{"accuracy", progress.best_accuracy}, {"loss", progress.best_loss}, {"step", progress.best_step}}},
                {"elapsed_seconds", elapsed},
                {"timing", to_json(progress.timing)},
                {"truncated", progress.truncated},
                {"data", data.sources},
                {"window", {{"loss", progress.window_loss}, {"steps", progress.window_steps}}}};
  if (ranks.comm->size() > 1) {  // a run of one process writes what it always wrote
    state["ranks"] = ranks.comm->size();
    state["rng"]["dropout_ranks"] = ranks.rank_dropout;
  }
  return state;
}

json read_trainer_state(const std::string& path) {
  // Its deepest containers are the RNG states' word arrays, four levels below the top.
  constexpr int kMaxDepth = 8;
  json state = parse_json_strictly(read_whole_file(path, kJsonFileLimit), path, kMaxDepth);
  JsonFields fields(state, path);
  const std::string format = fields.string("format");
  if (format != kTrainerFormat)
    throw IOError(cat(path, ": 'format' is ", json(format).dump(), ", not ", json(kTrainerFormat).dump(),
                      " (a file this version cannot read)"));
  return state;
}

namespace {

/// The counters, best validation and time of trainer.json, each inside the range a run writes: an edited
/// value would otherwise resume at a negative step, report a best step after the last one, or count time
/// that never passed. IOError naming the key.
void restore_progress(RunProgress& p, JsonFields& fields, int64_t total_steps) {
  // More than any run has lasted (317 years), and far inside what a double adds up exactly to the second.
  constexpr double kMaxSeconds = 1e10;
  p.step = fields.integer_in("step", 0, kMaxSteps);
  p.published_step = p.step;
  const int64_t saved_total = fields.integer_in("total_steps", std::max<int64_t>(p.step, 1), kMaxSteps);
  p.total_steps = total_steps > 0 ? total_steps : saved_total;
  fields.integer_in("epoch", 0, kMaxSteps);  // written for readers; the data stream keeps its own
  p.truncated = fields.integer_in("truncated", 0, INT64_MAX);
  p.elapsed_before = fields.number_in("elapsed_seconds", 0, kMaxSeconds);
  if (fields.has("timing")) {
    JsonFields t(fields.object("timing"), fields.file(), "timing.");
    p.timing = {t.number_in("train_seconds", 0, kMaxSeconds), t.number_in("validation_seconds", 0, kMaxSeconds),
                t.number_in("checkpoint_seconds", 0, kMaxSeconds)};
    t.refuse_unknown();
  } else {  // a run from before the split: all its time counts as training
    p.timing.train_seconds = p.elapsed_before;
  }
  JsonFields best(fields.object("best"), fields.file(), "best.");
  p.best_accuracy = best.number_in("accuracy", -1, 1);  // -1: no validation yet
  if (p.best_accuracy < 0 && p.best_accuracy != -1)
    throw IOError(cat(fields.file(), ": 'best.accuracy' is ", p.best_accuracy, ", neither -1 (none yet) nor in [0, 1]"));
  p.best_loss = best.number_in("loss", 0, HUGE_VAL);
  p.best_step = best.integer_in("step", 0, p.step);
  best.refuse_unknown();
  JsonFields window(fields.object("window"), fields.file(), "window.");
  p.window_loss = window.number_in("loss", 0, HUGE_VAL);
  p.window_steps = window.integer_in("steps", 0, p.step);
  window.refuse_unknown();
}

}  // namespace

void restore_run_state(Run& run, const json& state, const std::string& dir, int64_t total_steps) {
  const std::string path = dir + "/trainer.json";
  JsonFields fields(state, path);
  fields.string("format");  // read_trainer_state checked it
  fields.object("options");  // read by train_options_from_json
  if (fields.has("data")) fields.object("data");  // the fingerprints, compared by resume
  if (fields.has("ranks")) fields.integer_in("ranks", 1, INT32_MAX);
  RunProgress& p = run.progress;
  restore_progress(p, fields, total_steps);
  run.schedule = saved_schedule(fields.object("schedule"), run.schedule, path);
  // A new total stretches the decay over it, as a fresh run's set-up would have (else a cosine or linear
  // schedule sits at min_lr for every added step).
  if (total_steps > 0) run.schedule.total_steps = std::max(p.total_steps, run.schedule.warmup_steps + 1);
  JsonFields rng(fields.object("rng"), path, "rng.");
  run.data.stream->set_state(rng.object("data"), path);
  run.dropout_rng->set_state(generator_state(rng.object("dropout"), path, "rng.dropout."));
  if (rng.has("dropout_ranks")) rng.array("dropout_ranks");  // read by resume on ranks 1..
  rng.refuse_unknown();
  fields.refuse_unknown();
  p.metrics.clear();
  if (std::filesystem::exists(dir + "/metrics.csv")) {
    for (const MetricsRow& row : read_metrics_csv(dir + "/metrics.csv"))
      if (row.step <= p.step) p.metrics.push_back(row);
  }
}

}  // namespace tapegrad
