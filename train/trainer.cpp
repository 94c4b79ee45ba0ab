#include "train/trainer.h"

#include <cmath>
#include <filesystem>
#include <optional>
#include <ostream>
#include <utility>

#include "train/checkpoint/checkpoint.h"
#include "train/io/run_directory.h"
#include "train/io/run_lock.h"
#include "train/io/shell_command.h"
#include "train/run_on_ranks.h"
#include "train/run_setup.h"
#include "train/run_state.h"
#include "train/training_loop.h"
#include "train/training_memory.h"
#include "train/training_stream.h"

namespace tapegrad {

namespace fs = std::filesystem;
using nlohmann::json;

json to_json(const TrainSummary& s) {
  json j = {{"steps", s.steps},
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
  if (s.language_model) {
    j["final_valid_perplexity"] = std::exp(s.final_loss);
    j["final_valid_bits_per_character"] = s.final_bits_per_character;
  }
  if (s.ranks > 1) {
    j["ranks"] = s.ranks;
    j["global_batch"] = s.global_batch;
    j["rank_wait_seconds_per_step"] = s.rank_wait_seconds_per_step;
    j["allreduce_seconds_per_step"] = s.allreduce_seconds_per_step;
  }
  return j;
}

std::unique_ptr<nn::SequenceClassifier> build_classifier(const nn::ClassifierOptions& options, Generator& init,
                                                         std::shared_ptr<Generator> dropout_rng) {
  return std::make_unique<nn::SequenceClassifier>(options, init, std::move(dropout_rng));
}

namespace {

/// The paths of options, absolute (trainer.json saves them so, and --resume works from any working directory).
TrainOptions with_absolute_paths(TrainOptions options) {
  for (std::string* path : {&options.data, &options.valid, &options.init, &options.tokenizer_model})
    if (!path->empty()) *path = fs::absolute(*path).lexically_normal().string();
  return options;
}

/// This rank's part of a new run's set-up, up to the model's first forward; on rank 0 then the lock of --out.
void set_up_new_run(Run& run, const TrainOptions& options, const ModelBuilder& build, std::optional<RunLock>& lock) {
  const int rank = run.ranks.comm->rank();
  validate(options);
  if (rank == 0) check_out_directory(options.out, "--out");  // read only: nothing is touched before every check
  run.options = with_absolute_paths(options);
  std::optional<LoadedModel> init;
  std::optional<LoadedLanguageModel> init_lm;
  if (!options.init.empty()) {
    const bool lm_checkpoint = checkpoint_kind(options.init) == kLanguageModelKind;
    if (lm_checkpoint != is_language_model(options))
      throw ValueError(cat("--init ", options.init, " holds a ", lm_checkpoint ? "language model" : "classifier",
                           ", and this run trains a ", lm_checkpoint ? "classifier" : "language model (--task lm)"));
    nn::ClassifierOptions saved;
    if (lm_checkpoint) {
      init_lm = load_language_model(options.init);
      saved = nn::body_options(init_lm->options);
      run.options.tie_embeddings = init_lm->options.tie_embeddings;
    } else {
      init = load_model(options.init);
      saved = init->options;
    }
    // The checkpoint's model, but the run's own training-only settings: dropout and the load-balancing weight
    // change no weight and nothing the model computes at inference, so fine-tuning chooses them (as
    // from_pretrained(..., hidden_dropout_prob=...) does); config.json records them.
    run.options.model = saved;
    run.options.model.dropout = options.model.dropout;
    nn::take_training_settings(run.options.model, options.model.settings);
    run.options.context_length = saved.context_length;
  }
  run.data = load_training_data(run.options, init ? &init->vocab : nullptr, init_lm ? &init_lm->tokenizer : nullptr);
  fit_model_to_data(run.options, run.data);
  check_memory(run.options);
  if (init && init->labels != run.data.labels)
    throw ValueError(cat("--init ", options.init, ": its labels differ from the data's (", init->labels.size(), " vs ",
                         run.data.labels.size(), "); fine-tuning needs the same label set"));
  Generator init_gen(run.options.seed);
  const uint64_t dropout_seed = run.options.seed ^ kDropoutStream;
  run.dropout_rng =
      std::make_shared<Generator>(rank == 0 ? Generator(dropout_seed) : rank_dropout_stream(dropout_seed, rank, 0));
  build_model(run, build, init_gen);
  check_memory(run.options);  // again: a builder may build a larger model than the options describe
  if (init) run.model->module().load_state_dict(init->model->state_dict());
  if (init_lm) run.model->module().load_state_dict(init_lm->model->state_dict());
  set_up_training(run);
  try_forward(run);
  if (rank != 0) return;  // the run directory is rank 0's
  // The lock before anything in --out is written or removed, and before the check below, so that a second
  // trainer hears that the directory is in use rather than advice to resume it.
  lock.emplace(options.out, "--out");
  const fs::path out(options.out);
  if (!options.overwrite && (fs::exists(out / "trainer.json") || fs::is_symlink(out / "latest")))
    throw ValueError(cat("--out ", options.out, " already holds a training run: continue it with `",
                         suggested_command({"train", "--resume", options.out}), "`, choose another --out, ",
                         "or pass --overwrite to replace it"));
  std::error_code ignored;
  fs::remove(out / "metrics.csv", ignored);
}

/// "training 1234 parameters on task majority for 2000 steps (batch 32, ...) into runs/x"
void log_start(const Run& run, std::ostream& log) {
  const TrainOptions& o = run.options;
  const int ranks = run.ranks.comm->size();
  const bool language_model = run.data.tokenizer.has_value();
  log << "training " << (language_model ? "a language model of " : "") << run.model->module().parameter_count()
      << " parameters on " << (o.data.empty() ? "task " + o.task.name : o.data) << " for " << run.progress.total_steps
      << " steps (batch " << o.batch_size;
  if (ranks > 1)
    log << " per rank x " << ranks << " ranks" << (run.ranks.hosts > 1 ? cat(" on ", run.ranks.hosts, " hosts") : "")
        << " = " << o.batch_size * ranks << " per step";
  log << ", context " << o.context_length << ", ";
  if (language_model)
    log << run.data.tokenizer->vocab_size() << " tokens (" << tokenizer_kind_name(run.data.tokenizer->kind()) << ")";
  else
    log << run.data.vocab.size() << " tokens, " << run.data.labels.size() << " classes";
  log << ") into " << o.out << "\n";
}

}  // namespace

TrainSummary train(const TrainOptions& options, std::ostream& given_log, const ModelBuilder& build,
                   const Parallelism& parallelism) {
  Run run;
  if (parallelism.comm) run.ranks.comm = parallelism.comm;
  std::optional<RunLock> lock;
  const std::string error = set_up_on_rank(run, [&] { set_up_new_run(run, options, build, lock); });
  if (run.ranks.several()) join_ranks(run, error, parallelism.data_parallel);
  if (lock) lock->announce();  // every check passed: the run starts
  std::ostream& log = run.ranks.comm->rank() == 0 ? given_log : null_log();
  log_start(run, log);
  return run_training_loop(run, log);
}

}  // namespace tapegrad
