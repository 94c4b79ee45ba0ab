#include "train/cli/checkpoint_outputs.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "autograd/error.h"
#include "train/data/suggested_prompt.h"
#include "train/data/vocab.h"
#include "train/io/shell_command.h"
#include "train/io/text_lines.h"
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

LoadedModel load_model_for_outputs(const std::string& dir, const std::vector<std::string>& texts) {
  if (checkpoint_kind(dir) == kLanguageModelKind) {
    // The hint runs as printed: a prompt this model's tokenizer and context take, from the user's first text.
    const LoadedLanguageModel lm = load_language_model(dir);
    const std::vector<int64_t> ids = texts.empty() ? std::vector<int64_t>{} : lm.tokenizer.encode(texts.front());
    const std::string prompt = suggested_prompt(lm.tokenizer, ids, lm.options.context_length);
    std::string hint = cat("sample from it with `", suggested_command({"generate", "--checkpoint", dir, "--prompt=" + prompt}), "`");
    std::error_code ec;
    if (const auto saved = saved_options(dir); saved && std::filesystem::is_regular_file(saved->data, ec))
      hint += cat(", score a text with `", suggested_command({"eval", "--checkpoint", dir, "--data", saved->data}), "`");
    throw ValueError(cat(dir, " holds a language model, which has no labels to predict: ", hint));
  }
  return load_model(dir);
}

LoadedLanguageModel load_language_model_for_outputs(const std::string& dir, const std::string& prompt) {
  if (checkpoint_kind(dir) != kLanguageModelKind) {
    // predict takes any text with a word (an unknown one reads as <unk>): the prompt, where it has one.
    const bool usable = find_invalid_utf8(prompt) == prompt.size() && !split_words(prompt).empty();
    throw ValueError(cat(dir, " holds a classifier, not a language model: `",
                         suggested_command({"predict", "--checkpoint", dir, "--text=" + (usable ? prompt : "text")}),
                         "` labels a text with it"));
  }
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
