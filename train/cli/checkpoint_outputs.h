#pragma once
// What eval and predict share: a checkpoint loaded for outputs a user acts on (refused up front when it cannot
// give finite ones), its training options and evaluation budget, and the one line that reports an output
// that is not a number.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "train/checkpoint/checkpoint.h"
#include "train/evaluate.h"
#include "train/train_options.h"

namespace tapegrad::cli {

/// The training options saved with a checkpoint, when it has them (for the task's defaults); a damaged
/// trainer.json is an error, not a silent fallback to other defaults.
std::optional<TrainOptions> saved_options(const std::string& dir);

/// The evaluation batch budget for a checkpoint: the tokens of the batch it was trained with (evaluate.h).
int64_t evaluation_tokens_for(const std::string& dir, int64_t context_length);

/// load_model (config.json's settings inside their declared ranges, so that none makes every output
/// infinite or blind to the text), refusing a checkpoint of a language model and naming the commands that
/// read it, runnable as printed: generate with a prompt from the first of `texts` the model takes, and
/// eval --data of the text it was trained on, while that file is there.
LoadedModel load_model_for_outputs(const std::string& dir, const std::vector<std::string>& texts);
/// load_language_model, refusing a classifier's checkpoint and naming predict, with `prompt` as its text.
LoadedLanguageModel load_language_model_for_outputs(const std::string& dir, const std::string& prompt);

/// A NonFiniteOutput of classify or evaluate as the one line eval and predict give: the checkpoint, which
/// output of which text or example (`item`), and the cause.
[[noreturn]] void refuse_non_finite(const NonFiniteOutput& e, const std::string& checkpoint, const LoadedModel& loaded,
                                    const std::string& item);

}  // namespace tapegrad::cli
