// resume(): a run continued from the latest checkpoint in its directory (trainer.h).
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

#include "train/checkpoint/checkpoint.h"
#include "train/io/read_file.h"
#include "train/io/run_directory.h"
#include "train/io/run_lock.h"
#include "train/io/strict_json.h"
#include "train/run_on_ranks.h"
#include "train/run_setup.h"
#include "train/run_state.h"
#include "train/trainer.h"
#include "train/training_loop.h"
#include "train/training_memory.h"
#include "train/training_stream.h"

namespace tapegrad {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// The saved options, with what a resumed run may change, and the data relocated when given again (as it must
/// after a pipe), never with other examples.
TrainOptions resumed_options(const json& state, const std::string& state_path, const std::string& dir,
                             const ResumeOptions& given) {
  TrainOptions o = train_options_from_json(state.at("options"), state_path);
  o.out = dir;
  o.verbose = given.verbose;
  o.detect_anomaly = given.detect_anomaly;
  o.activation_checkpointing = given.activation_checkpointing;
  if (given.threads >= 0) o.threads = given.threads;
  const json saved_data = state.value("data", json::object());
  const auto relocate = [&](const std::string& path, std::string& saved, const char* flag, const char* pipe_key) {
    if (!path.empty()) {
      if (saved.empty()) throw ValueError(cat("--resume: ", dir, " was started without ", flag, "; a resumed run keeps its data"));
      saved = fs::absolute(path).lexically_normal().string();
    } else if (saved_data.value(pipe_key, false)) {
      throw ValueError(cat("--resume: the run read ", flag, " from a pipe (", saved,
                           "), which cannot be read again: give the same data with ", flag));
    }
  };
  relocate(given.data, o.data, "--data", "pipe");
  relocate(given.valid, o.valid, "--valid", "valid_pipe");
  validate_activation_checkpointing(o, [&dir](std::string_view field) {  // the flag given now, and the run's --ffn
    if (field == "model.ffn") return cat(dir, "'s --ffn");
    if (field == "model.n_layers") return cat(dir, "'s --layers");
    return std::string("--activation-checkpointing");
  });
  try {
    validate(o, [](std::string_view field) { return cat("'options.", field, "'"); });
  } catch (const ValueError& e) {
    throw IOError(cat(state_path, ": the saved options are invalid: ", e.what()));
  }
  return o;
}

/// The data read again must hold the examples the run started with (trainer.json keeps their fingerprints).
void require_same_examples(const Run& run, const json& state) {
  const json saved_data = state.value("data", json::object());
  for (auto [key, path] : {std::pair{"fingerprint", run.options.data}, {"valid_fingerprint", run.options.valid}}) {
    const std::string now = run.data.sources.value(key, std::string());
    if (saved_data.contains(key) && now != saved_data.at(key))
      throw ValueError(cat("--resume: ", path, " holds other examples than the run started with (fingerprint ", now,
                           ", saved ", saved_data.at(key).get<std::string>(), "); resuming needs the same data"));
  }
}

/// trainer.json's model options (`saved`, as read: older keys in today's form) are what the run's other
/// options and its data make of them (fit_model_to_data): a value that differs was edited, and would be
/// silently replaced.
void require_fitted_model(const Run& run, const json& saved, const std::string& state_path) {
  const json fitted = to_json(run.options).at("model");
  for (const auto& [key, value] : fitted.items())
    if (saved.at(key) != value)
      throw IOError(cat(state_path, ": 'options.model.", key, "' is ", saved.at(key).dump(), ", but the run's other options and ",
                        "its data make it ", value.dump(), ": the file was edited"));
}

/// The saved weights into the model the saved options make; a checkpoint whose weights another model wrote is
/// refused by the files' names.
void load_saved_weights(Run& run, const nn::NamedTensors& weights, const std::string& dir) {
  try {
    run.model->module().load_state_dict(weights);
  } catch (const Error& e) {  // a shape, dtype or value the saved options do not make
    std::string_view what = e.what();
    if (what.rfind("load_state_dict: ", 0) == 0) what.remove_prefix(17);
    throw IOError(cat(dir, "/model.safetensors: not the model ", dir, "/trainer.json's options make (", what, ")"));
  }
}

/// Ranks 1.. continue their own dropout streams when the checkpoint has them (the same number of ranks), else
/// start new ones from the seed, the rank and the step.
void restore_rank_dropout(Run& run, const json& state, const std::string& path) {
  const int rank = run.ranks.comm->rank();
  if (rank == 0) return;
  const json saved_streams = state.at("rng").value("dropout_ranks", json::array());
  if (static_cast<size_t>(rank) <= saved_streams.size())
    run.dropout_rng->set_state(generator_state(saved_streams.at(static_cast<size_t>(rank) - 1), path,
                                               cat("rng.dropout_ranks[", rank - 1, "].")));
  else
    *run.dropout_rng = rank_dropout_stream(run.options.seed ^ kDropoutStream, rank, run.progress.step);
}

/// This rank's part of restoring the run in dir: the lock (rank 0), the options, data, model, optimizer and
/// state of the latest checkpoint. Returns how many ranks saved it.
int restore_run(Run& run, const std::string& dir, const ResumeOptions& options, const ModelBuilder& build,
                 std::optional<RunLock>& lock) {
  if (options.steps < 0) throw ValueError(cat("--steps must be positive, got ", options.steps));
  check_resume_directory(dir);
  const std::string state_path = dir + "/trainer.json";
  std::error_code ec;
  if (!fs::exists(state_path, ec)) throw IOError(cat(state_path, ": not found (is ", dir, " a tapegrad run directory?)"));
  const json state = read_trainer_state(state_path);
  if (run.ranks.comm->rank() == 0) lock.emplace(dir, "--resume");  // released when this run ends, however it ends
  try {
    run.options = resumed_options(state, state_path, dir, options);
    const json saved_model = to_json(run.options).at("model");
    check_memory(run.options);  // the saved sizes, before the checkpoint is loaded
    std::optional<LoadedModel> saved;
    std::optional<LoadedLanguageModel> saved_lm;
    if (is_language_model(run.options))
      saved_lm = load_language_model(dir);
    else
      saved = load_model(dir);
    run.data = load_training_data(run.options, saved ? &saved->vocab : nullptr, saved_lm ? &saved_lm->tokenizer : nullptr);
    fit_model_to_data(run.options, run.data);
    require_fitted_model(run, saved_model, state_path);
    require_same_examples(run, state);
    run.dropout_rng = std::make_shared<Generator>(0);  // its state is restored below
    Generator unused(0);                               // the saved weights replace the initial ones
    build_model(run, build, unused);
    load_saved_weights(run, saved ? saved->model->state_dict() : saved_lm->model->state_dict(), dir);
    set_up_training(run);
    load_optimizer_state(*run.optimizer, dir + "/optimizer.safetensors");
    restore_run_state(run, state, dir, options.steps);
    if (options.steps > 0 && options.steps <= run.progress.step)
      throw ValueError(cat("--steps ", options.steps, " is not more than the ", run.progress.step, " steps ", dir, " has done"));
    restore_rank_dropout(run, state, state_path);
    return state.value("ranks", 1);
  } catch (const json::exception& e) {
    throw IOError(cat(state_path, ": malformed trainer state (", json_error_text(e), ")"));
  }
}

}  // namespace

TrainSummary resume(const std::string& dir, const ResumeOptions& options, std::ostream& given_log,
                    const ModelBuilder& build, const Parallelism& parallelism) {
  Run run;
  if (parallelism.comm) run.ranks.comm = parallelism.comm;
  std::optional<RunLock> lock;
  int saved_ranks = 1;
  const std::string error = set_up_on_rank(run, [&] {
    saved_ranks = restore_run(run, dir, options, build, lock);
  });
  if (run.ranks.several()) join_ranks(run, error, parallelism.data_parallel);
  if (lock) lock->announce();  // every check passed: the run goes on
  const int ranks = run.ranks.comm->size();
  std::ostream& log = run.ranks.comm->rank() == 0 ? given_log : null_log();
  log << "resuming " << dir << " at step " << run.progress.step << " of " << run.progress.total_steps;
  if (ranks > 1 || saved_ranks > 1)
    log << " on " << ranks << (ranks == 1 ? " rank" : " ranks") << " (saved by " << saved_ranks
        << (saved_ranks == 1 ? " rank" : " ranks") << "; batch " << run.options.batch_size * ranks << " per step)";
  log << "\n";
  return run_training_loop(run, log);
}

}  // namespace tapegrad
