#pragma once
// config.json: everything needed to rebuild a classifier (nn::ClassifierOptions), component names
// included. The keys are documented in docs/checkpoints.md. Checkpoints written before the norm,
// attention and ffn components existed have no such keys and load with the built-in ones (layernorm,
// softmax, dense), which is what they were trained with.
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "nn/classifier.h"

namespace tapegrad::nn {

// to_json / from_json of ClassifierOptions: one list of its fields, from which config.json is written and
// (after checked_like's strict reading) read.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ClassifierOptions, vocab_size, d_model, n_heads, d_ff, n_layers, context_length,
                                   num_classes, dropout, norm_first, layer_norm_eps, final_norm, pad_id, positional,
                                   attention, norm, ffn, pool, activation, causal, temperature, experts, top_k,
                                   moe_aux_weight)

}  // namespace tapegrad::nn

namespace tapegrad {

/// The config.json keys an older checkpoint may lack; reading one takes the default for each.
const std::set<std::string>& model_keys_added_later();
/// config.json of a classifier.
nlohmann::json model_config_json(const nn::ClassifierOptions& options);
/// The model options of a config.json object, read strictly (strict_json.h: every key present, of
/// exactly its type, no unknown key) and validated (nn::validate, which also refuses a component name
/// that this program has not registered); IOError naming `file` and the key (prefix + key: "model."
/// inside trainer.json).
nn::ClassifierOptions model_options_from_json(const nlohmann::json& config, const std::string& file,
                                              const std::string& prefix = "");
/// Parses the text of a config.json (see model_options_from_json); IOError naming `name` (the file).
nn::ClassifierOptions parse_model_config(std::string_view text, const std::string& name);
/// Reads config.json (a regular file or a pipe, at most 16 MiB) and parses it.
nn::ClassifierOptions read_model_config(const std::string& path);

}  // namespace tapegrad
