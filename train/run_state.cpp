#include "train/run_state.h"

#include <algorithm>
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
  json state = {{"format", "tapegrad-trainer-1"},
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
  return parse_json_strictly(read_whole_file(path, kJsonFileLimit), path, kMaxDepth);
}

void restore_run_state(Run& run, const json& state, const std::string& dir, int64_t total_steps) {
  RunProgress& p = run.progress;
  p.step = state.at("step").get<int64_t>();
  p.published_step = p.step;
  p.total_steps = total_steps > 0 ? total_steps : state.at("total_steps").get<int64_t>();
  run.schedule = saved_schedule(state.at("schedule"), run.schedule, dir + "/trainer.json");
  // A new total stretches the decay over it, as a fresh run's set-up would have (else a cosine or linear
  // schedule sits at min_lr for every added step).
  if (total_steps > 0) run.schedule.total_steps = std::max(p.total_steps, run.schedule.warmup_steps + 1);
  run.data.stream->set_state(state.at("rng").at("data"));
  run.dropout_rng->set_state(generator_state(state.at("rng").at("dropout")));
  p.best_accuracy = state.at("best").at("accuracy").get<double>();
  p.best_loss = state.at("best").at("loss").get<double>();
  p.best_step = state.at("best").at("step").get<int64_t>();
  p.elapsed_before = state.at("elapsed_seconds").get<double>();
  if (state.contains("timing")) {
    const json& t = state.at("timing");
    p.timing = {t.at("train_seconds").get<double>(), t.at("validation_seconds").get<double>(),
                t.at("checkpoint_seconds").get<double>()};
  } else {  // a run from before the split: all its time counts as training
    p.timing.train_seconds = p.elapsed_before;
  }
  p.truncated = state.at("truncated").get<int64_t>();
  p.window_loss = state.at("window").at("loss").get<double>();
  p.window_steps = state.at("window").at("steps").get<int64_t>();
  p.metrics.clear();
  if (std::filesystem::exists(dir + "/metrics.csv")) {
    for (const MetricsRow& row : read_metrics_csv(dir + "/metrics.csv"))
      if (row.step <= p.step) p.metrics.push_back(row);
  }
}

}  // namespace tapegrad
