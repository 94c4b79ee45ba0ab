#include "train/trainer.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <ostream>
#include <tuple>
#include <utility>

#include "autograd/autograd.h"
#include "optim/adam.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
#include "train/data/batching.h"
#include "train/checkpoint/checkpoint.h"
#include "train/parallel/data_parallel.h"
#include "train/io/run_lock.h"
#include "train/io/run_directory.h"
#include "train/run_on_ranks.h"
#include "train/run_state.h"
#include "train/io/strict_json.h"
#include "train/training_loop.h"
#include "train/training_memory.h"
#include "train/training_stream.h"

namespace tapegrad {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int64_t kDefaultSteps = 2000;
constexpr uint64_t kDropoutStream = 0x64726f706f7574ULL;

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainOptions& o, const nn::NamedTensors& params) {
  if (o.optimizer == "sgd")
    return std::make_unique<optim::SGD>(params, optim::SgdOptions{o.lr, o.momentum, 0, false, o.weight_decay});
  if (o.optimizer == "adam")
    return std::make_unique<optim::Adam>(params, optim::AdamOptions{o.lr, 0.9, 0.999, 1e-8, o.weight_decay});
  if (o.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{o.lr, 0.9, 0.999, 1e-8, o.weight_decay});
  throw ValueError(cat(option_field_name("optimizer"), ": '", o.optimizer, "' is not one of sgd, adam, adamw"));
}

/// Fills in what the model takes from the data: vocab_size, num_classes, and context_length (when 0: the
/// longest sequence, plus the <cls> token when pooling uses one).
void fit_model_to_data(TrainOptions& o, const TrainingData& data) {
  const bool cls = nn::prepends_cls(o.model);
  if (o.context_length <= 0) o.context_length = data.longest + (cls ? 1 : 0);
  o.model.vocab_size = data.vocab.size();
  o.model.num_classes = static_cast<int64_t>(data.labels.size());
  o.model.context_length = o.context_length;
  o.model.pad_id = Vocab::kPad;
}

/// run.model from `build`, refused unless it agrees with the data; its own options become the run's, so that
/// trainer.json and config.json record what was built.
void build_model(Run& run, const ModelBuilder& build, Generator& init) {
  if (!build) throw ValueError("no model builder given");
  run.model = build(run.options.model, init, run.dropout_rng);
  if (!run.model) throw ValueError("the model builder returned no model");
  const nn::ClassifierOptions& built = run.model->options();
  const nn::ClassifierOptions& data = run.options.model;
  for (auto [name, has, needs] : {std::tuple{"vocab_size", built.vocab_size, data.vocab_size},
                                  {"num_classes", built.num_classes, data.num_classes},
                                  {"context_length", built.context_length, data.context_length}})
    if (has != needs)
      throw ValueError(
          cat("the model builder built a model with ", name, " = ", has, ", but the data needs ", name, " = ", needs));
  run.options.model = built;
}

void setup_training(Run& run) {
  TrainOptions& o = run.options;
  if (o.epochs > 0) {
    const int64_t step_batch = o.batch_size * run.comm->size();
    const int64_t per_epoch = (run.data.stream->size() + step_batch - 1) / step_batch;
    if (__builtin_mul_overflow(o.epochs, per_epoch, &run.total_steps) || run.total_steps > kMaxSteps)
      throw ValueError(cat("--epochs ", o.epochs, " x ", per_epoch, " steps an epoch is more than ", kMaxSteps, " steps"));
  } else {
    run.total_steps = o.steps > 0 ? o.steps : kDefaultSteps;
  }
  run.optimizer = make_optimizer(o, run.model->named_parameters());
  run.schedule = {optim::parse_schedule(o.schedule), o.lr, o.warmup, std::max(run.total_steps, o.warmup + 1), 0};
  run.schedule.lr_at(0);  // validates the schedule before any work
}

/// One forward of a few validation examples before the run folder is touched: a component that fails only
/// when it runs (a user's variant, say) stops the run here, with nothing written and no lock left behind.
/// No gradient and no dropout (eval mode), so no random stream moves.
void try_forward(Run& run) {
  if (run.data.valid.empty()) return;
  NoGradGuard no_grad;
  const size_t n = std::min<size_t>(run.data.valid.size(), 2);
  const std::vector<Example> few(run.data.valid.begin(), run.data.valid.begin() + static_cast<std::ptrdiff_t>(n));
  const Batch batch = make_batch(few, run.data.vocab, run.data.labels, run.options.context_length,
                                 nn::prepends_cls(run.options.model));
  run.model->eval();
  run.model->forward(batch.ids, batch.key_padding_mask);
  run.model->train();
}

}  // namespace

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

TrainSummary train(const TrainOptions& options, std::ostream& log) { return train(options, log, build_classifier); }

TrainSummary train(const TrainOptions& options, std::ostream& log, const ModelBuilder& build) {
  return train(options, log, build, Parallelism{});
}

namespace {

/// A stream that drops what it is given: the log of ranks other than 0.
std::ostream& null_log() {
  static std::ostream none(nullptr);
  return none;
}

/// Runs a rank's part of the set-up: on one process as it is; on several, a failure is kept for
/// join_ranks to tell every rank, so that none is left waiting for the others.
template <class Setup>
std::string set_up(const Run& run, Setup&& setup) {
  if (run.comm->size() == 1) {
    setup();
    return {};
  }
  try {
    setup();
  } catch (const std::exception& e) {
    const std::string what = e.what();
    return what.empty() ? "set-up failed" : what;
  }
  return {};
}

}  // namespace

TrainSummary train(const TrainOptions& options, std::ostream& given_log, const ModelBuilder& build,
                   const Parallelism& parallelism) {
  Run run;
  if (parallelism.comm) run.comm = parallelism.comm;
  const int ranks = run.comm->size(), rank = run.comm->rank();
  std::ostream& log = rank == 0 ? given_log : null_log();
  std::optional<RunLock> lock;
  const std::string error = set_up(run, [&] {
    validate(options);
    if (rank == 0) check_out_directory(options.out, "--out");  // read only: nothing is touched before every check
    run.options = options;
    // Paths are saved absolute in trainer.json, so --resume works from any working directory.
    for (std::string* path : {&run.options.data, &run.options.valid, &run.options.init})
      if (!path->empty()) *path = fs::absolute(*path).lexically_normal().string();
    std::optional<LoadedModel> init;
    if (!options.init.empty()) {
      init = load_model(options.init);
      // The checkpoint's model, but the run's own training-only settings: dropout and the load-balancing weight
      // change no weight and nothing the model computes at inference, so fine-tuning chooses them (as
      // from_pretrained(..., hidden_dropout_prob=...) does); config.json records them.
      run.options.model = init->options;
      run.options.model.dropout = options.model.dropout;
      nn::take_training_settings(run.options.model, options.model.settings);
      run.options.context_length = init->options.context_length;
    }
    run.data = load_training_data(run.options, init ? &init->vocab : nullptr);
    fit_model_to_data(run.options, run.data);
    check_memory(run.options);
    if (init && init->labels != run.data.labels)
      throw ValueError(cat("--init ", options.init, ": its labels differ from the data's (", init->labels.size(),
                           " vs ", run.data.labels.size(), "); fine-tuning needs the same label set"));
    Generator init_gen(run.options.seed);
    const uint64_t dropout_seed = run.options.seed ^ kDropoutStream;
    run.dropout_rng =
        std::make_shared<Generator>(rank == 0 ? Generator(dropout_seed) : rank_dropout_stream(dropout_seed, rank, 0));
    build_model(run, build, init_gen);
    check_memory(run.options);  // again: a builder may build a larger model than the options describe
    if (init) run.model->load_state_dict(init->model->state_dict());
    setup_training(run);
    try_forward(run);
    if (rank != 0) return;  // the run directory is rank 0's
    // The lock before anything in --out is written or removed, and before the check below, so that a second
    // trainer hears that the directory is in use rather than advice to resume it.
    lock.emplace(options.out, "--out");
    const fs::path out(options.out);
    if (!options.overwrite && (fs::exists(out / "trainer.json") || fs::is_symlink(out / "latest")))
      throw ValueError(cat("--out ", options.out, " already holds a training run: --resume it, choose another --out, ",
                           "or pass --overwrite to replace it"));
    std::error_code ignored;
    fs::remove(run.options.out + "/metrics.csv", ignored);
  });
  if (ranks > 1) join_ranks(run, error, parallelism.data_parallel);
  if (lock) lock->announce();  // every check passed: the run starts
  log << "training " << run.model->parameter_count() << " parameters on "
      << (run.options.data.empty() ? "task " + run.options.task.name : run.options.data) << " for " << run.total_steps
      << " steps (batch " << run.options.batch_size;
  if (ranks > 1)
    log << " per rank x " << ranks << " ranks" << (run.hosts > 1 ? cat(" on ", run.hosts, " hosts") : "") << " = "
        << run.options.batch_size * ranks << " per step";
  log << ", context " << run.options.context_length << ", " << run.data.vocab.size() << " tokens, "
      << run.data.labels.size() << " classes) into " << run.options.out << "\n";
  return run_training_loop(run, log);
}

TrainSummary resume(const std::string& dir, const ResumeOptions& options, std::ostream& log) {
  return resume(dir, options, log, build_classifier);
}

TrainSummary resume(const std::string& dir, const ResumeOptions& options, std::ostream& log,
                    const ModelBuilder& build) {
  return resume(dir, options, log, build, Parallelism{});
}

TrainSummary resume(const std::string& dir, const ResumeOptions& options, std::ostream& given_log,
                    const ModelBuilder& build, const Parallelism& parallelism) {
  Run run;
  if (parallelism.comm) run.comm = parallelism.comm;
  const int ranks = run.comm->size(), rank = run.comm->rank();
  std::ostream& log = rank == 0 ? given_log : null_log();
  std::optional<RunLock> lock;
  int saved_ranks = 1;
  const std::string error = set_up(run, [&] {
    if (options.steps < 0) throw ValueError(cat("--steps must be positive, got ", options.steps));
    check_resume_directory(dir);
    const std::string state_path = dir + "/trainer.json";
    std::error_code ec;
    if (!fs::exists(state_path, ec))
      throw IOError(cat(state_path, ": not found (is ", dir, " a tapegrad run directory?)"));
    const json state = read_trainer_state(state_path);
    if (rank == 0) lock.emplace(dir, "--resume");  // released when this run ends, however it ends
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
          if (saved.empty())
            throw ValueError(cat("--resume: ", dir, " was started without ", flag, "; a resumed run keeps its data"));
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
      run.data = load_training_data(run.options, &saved.vocab);
      fit_model_to_data(run.options, run.data);
      const auto require_same_examples = [&](const char* key, const std::string& path) {
        if (saved_data.contains(key) && run.data.sources.value(key, std::string()) != saved_data.at(key))
          throw ValueError(cat("--resume: ", path, " holds other examples than the run started with (fingerprint ",
                               run.data.sources.value(key, std::string()), ", saved ",
                               saved_data.at(key).get<std::string>(), "); resuming needs the same data"));
      };
      require_same_examples("fingerprint", run.options.data);
      require_same_examples("valid_fingerprint", run.options.valid);
      run.dropout_rng = std::make_shared<Generator>(0);  // its state is restored below
      Generator unused(0);                               // the saved weights replace the initial ones
      build_model(run, build, unused);
      run.model->load_state_dict(saved.model->state_dict());
      setup_training(run);
      load_optimizer_state(*run.optimizer, dir + "/optimizer.safetensors");
      restore_run_state(run, state, dir, options.steps);
      if (options.steps > 0 && options.steps <= run.step)
        throw ValueError(
            cat("--steps ", options.steps, " is not more than the ", run.step, " steps ", dir, " has done"));
      // Ranks 1.. continue their own dropout streams when the checkpoint has them (the same number of ranks),
      // else start new ones from the seed, the rank and the step.
      saved_ranks = state.value("ranks", 1);
      if (rank > 0) {
        const json saved_streams = state.at("rng").value("dropout_ranks", json::array());
        if (static_cast<size_t>(rank) <= saved_streams.size())
          run.dropout_rng->set_state(generator_state(saved_streams.at(static_cast<size_t>(rank) - 1)));
        else
          *run.dropout_rng = rank_dropout_stream(run.options.seed ^ kDropoutStream, rank, run.step);
      }
    } catch (const json::exception& e) {
      throw IOError(cat(state_path, ": malformed trainer state (", json_error_text(e), ")"));
    }
  });
  if (ranks > 1) join_ranks(run, error, parallelism.data_parallel);
  if (lock) lock->announce();  // every check passed: the run goes on
  log << "resuming " << dir << " at step " << run.step << " of " << run.total_steps;
  if (ranks > 1 || saved_ranks > 1)
    log << " on " << ranks << (ranks == 1 ? " rank" : " ranks") << " (saved by " << saved_ranks
        << (saved_ranks == 1 ? " rank" : " ranks") << "; batch " << run.options.batch_size * ranks << " per step)";
  log << "\n";
  return run_training_loop(run, log);
}

}  // namespace tapegrad
