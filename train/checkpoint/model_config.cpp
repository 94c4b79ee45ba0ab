#include "train/checkpoint/model_config.h"

#include "train/io/read_file.h"
#include "train/io/strict_json.h"

namespace tapegrad {

nlohmann::json model_config_json(const nn::ClassifierOptions& options) { return options; }

const std::set<std::string>& model_keys_added_later() {
  // The keys that came after the first checkpoints: the norm, attention and ffn components, causal and
  // temperature, and the moe block's. Older checkpoints lack them and were trained with the defaults (the
  // built-in variants, bidirectional attention, τ = 1, no moe).
  static const std::set<std::string> keys = {"attention", "norm",        "ffn",   "causal",
                                             "temperature", "experts", "top_k", "moe_aux_weight"};
  return keys;
}

nn::ClassifierOptions model_options_from_json(const nlohmann::json& config, const std::string& file,
                                              const std::string& prefix) {
  static const nlohmann::json example = nn::ClassifierOptions();
  nn::ClassifierOptions options = checked_like(config, example, file, prefix, model_keys_added_later()).get<nn::ClassifierOptions>();
  try {
    nn::validate(options, prefix.empty() ? file : cat(file, ": '", prefix.substr(0, prefix.size() - 1), "'"));
  } catch (const ValueError& e) {
    throw IOError(e.what());
  }
  return options;
}

nn::ClassifierOptions parse_model_config(std::string_view text, const std::string& name) {
  // config.json is one flat object: depth 0 is the object, and no value inside it is a container.
  return model_options_from_json(parse_json_strictly(text, name, 1), name);
}

nn::ClassifierOptions read_model_config(const std::string& path) {
  return parse_model_config(read_whole_file(path, kJsonFileLimit), path);
}

}  // namespace tapegrad
