#include "train/model_config.h"

#include "train/read_file.h"
#include "train/strict_json.h"

namespace tapegrad {

nlohmann::json model_config_json(const nn::ClassifierOptions& options) { return options; }

nn::ClassifierOptions model_options_from_json(const nlohmann::json& config, const std::string& file,
                                              const std::string& prefix) {
  // The keys that came with the norm, attention and ffn components: absent in older checkpoints, which
  // used the built-in variants (the defaults).
  // Likewise the moe block's keys (experts, top_k, moe_aux_weight): a checkpoint without them used no moe,
  // and the defaults are valid.
  static const std::set<std::string> added_later = {"attention", "norm", "ffn", "experts", "top_k", "moe_aux_weight"};
  static const nlohmann::json example = nn::ClassifierOptions();
  nn::ClassifierOptions options = checked_like(config, example, file, prefix, added_later).get<nn::ClassifierOptions>();
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
