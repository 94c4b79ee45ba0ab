#include "train/cli/checkpoint_outputs.h"

#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "autograd/error.h"
#include "train/run_state.h"

namespace tapegrad::cli {

using nlohmann::json;

namespace {

/// The largest finite value of a float dtype.
double largest_finite(DType dtype) {
  return dtype == DType::float64 ? std::numeric_limits<double>::max() : std::numeric_limits<float>::max();
}

DType model_dtype(const nn::Module& model) {
  const nn::NamedTensors parameters = model.named_parameters();
  return parameters.empty() ? DType::float32 : parameters.front().second.dtype();
}

/// The attention multiplies its queries by 1/temperature (nn/attention.cpp): a temperature whose reciprocal
/// overflows the weights' dtype makes every attention score infinite (1e-300 in a float32 model).
void refuse_overflowing_temperature(const std::string& dir, const nn::ClassifierOptions& options, const nn::Module& model) {
  const DType dtype = model_dtype(model);
  const nn::VariantSettings attention = nn::chosen_settings<nn::AttentionKind>(options);
  const double t = attention.declares("temperature") ? attention.real("temperature") : 1.0;
  if (1.0 / t > largest_finite(dtype))
    throw IOError(cat(dir, "/config.json: temperature = ", t, " is so small that 1/temperature overflows ",
                      dtype_name(dtype), ": every attention score would be infinite and every output NaN"));
}

}  // namespace

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
  LoadedModel loaded = load_model(dir);
  refuse_overflowing_temperature(dir, loaded.options, *loaded.model);
  return loaded;
}

LoadedLanguageModel load_language_model_for_outputs(const std::string& dir) {
  if (checkpoint_kind(dir) != kLanguageModelKind)
    throw ValueError(cat(dir, " holds a classifier, not a language model: `tapegrad predict --checkpoint ", dir,
                         " --text ...` labels texts with it"));
  LoadedLanguageModel loaded = load_language_model(dir);
  refuse_overflowing_temperature(dir, nn::body_options(loaded.options), *loaded.model);
  return loaded;
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
