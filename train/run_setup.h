#pragma once
// The set-up that a new run (trainer.cpp) and a resumed one (resume.cpp) share: the model fitted to the data
// and built, the optimizer and schedule, the first forward before anything is written, each rank's part of
// it, and the banner. What differs (options from flags or from trainer.json, fresh or restored state) is
// theirs.
#include <cstdint>
#include <exception>
#include <ostream>
#include <string>

#include "autograd/random.h"
#include "nn/language_model.h"
#include "train/run_state.h"
#include "train/trainer.h"

namespace tapegrad {

/// The seed of the dropout stream is the run's seed with these bits flipped.
inline constexpr uint64_t kDropoutStream = 0x64726f706f7574ULL;

/// Fills in what the model takes from the data: vocab_size, num_classes, and context_length (when 0: the
/// longest sequence, plus the <cls> token when pooling uses one). A language model's: vocab_size from the
/// tokenizer, and model = body_options of its LanguageModelOptions (causal attention, final norm, no padding).
void fit_model_to_data(TrainOptions& options, const TrainingData& data);

/// The language model a run's options describe (model, context length, tie_embeddings).
nn::LanguageModelOptions language_model_options(const TrainOptions& options);

/// run.model: the classifier `build` makes, refused unless it agrees with the data (a ValueError naming the
/// option and both numbers); its own options become the run's, so that trainer.json and config.json record
/// what was built. A language model's run (the data has a tokenizer) builds nn::LanguageModel itself.
void build_model(Run& run, const ModelBuilder& build, Generator& init);

/// run.progress.total_steps (from --steps or --epochs), the optimizer and the schedule (validated before any work).
void set_up_training(Run& run);

/// One forward of a few validation examples before the run folder is touched: a component that fails only
/// when it runs (a user's variant, say) stops the run here, with nothing written and no lock left behind.
/// No gradient and no dropout (eval mode), so no random stream moves.
void try_forward(Run& run);

/// A stream that drops what it is given: the log of ranks other than 0.
std::ostream& null_log();

/// Runs a rank's part of the set-up: on one process as it is; on several, a failure is returned (its message)
/// for join_ranks to tell every rank, so that none is left waiting for the others.
template <class Setup>
std::string set_up_on_rank(const Run& run, Setup&& setup) {
  if (!run.ranks.several()) {
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

}  // namespace tapegrad
