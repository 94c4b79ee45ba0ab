#include "train/cli/checkpoint_outputs.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "autograd/error.h"
#include "train/run_state.h"

namespace tapegrad::cli {

using nlohmann::json;

std::optional<TrainOptions> saved_options(const std::string& dir) {
  const std::string path = dir + "/trainer.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  const json state = read_trainer_state(path);
  if (!state.is_object() || !state.contains("options")) throw IOError(cat(path, ": no \"options\" object"));
  return train_options_from_json(state.at("options"), path);
}

int64_t evaluation_tokens_for(const std::string& dir, int64_t context_length) {
  const auto saved = saved_options(dir);
  return evaluation_tokens(saved ? saved->batch_size : TrainOptions().batch_size, context_length);
}

LoadedModel load_model_for_outputs(const std::string& dir) {
  if (checkpoint_kind(dir) == kLanguageModelKind)
    throw ValueError(cat(dir, " holds a language model, which has no labels to predict: sample from it with `tapegrad "
                         "generate --checkpoint ", dir, " --prompt ...`, score a text with `tapegrad eval --checkpoint ", dir,
                         " --data text.txt`"));
  return load_model(dir);
}

LoadedLanguageModel load_language_model_for_outputs(const std::string& dir) {
  if (checkpoint_kind(dir) != kLanguageModelKind)
    throw ValueError(cat(dir, " holds a classifier, not a language model: `tapegrad predict --checkpoint ", dir,
                         " --text ...` labels texts with it"));
  return load_language_model(dir);
}

[[noreturn]] void refuse_non_finite(const NonFiniteOutput& e, const std::string& checkpoint, const LoadedModel& loaded,
                                    const std::string& item) {
  std::string cause = overflow_cause(*loaded.model);
  const std::string temperature = "attention temperature ";
  if (const size_t at = cause.find(temperature); at != std::string::npos)
    cause.replace(at, temperature.size(), "config.json temperature ");  // where the user can change it
  if (e.sequence >= 0 && e.class_index >= 0)
    throw ValueError(cat(checkpoint, ": the logits of ", item, " ", e.sequence + 1, " are not finite ('",
                         loaded.labels[e.class_index], "' is ", e.value, ") ", cause));
  std::string what = e.what();
  if (what.starts_with("evaluate: ")) what.erase(0, 10);
  throw ValueError(cat(checkpoint, ": ", what));
}

}  // namespace tapegrad::cli
