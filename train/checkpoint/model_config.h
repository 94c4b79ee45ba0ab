#pragma once
// config.json: everything needed to rebuild a classifier (nn::ClassifierOptions), component names and their
// settings included:
//   {"d_model": 32, ..., "attention": "softmax", "ffn": "dense", ...,
//    "settings": {"attention": {"causal": false, "temperature": 1.0}, "norm": {"eps": 1e-05}}}
// "settings" holds, under each kind, every setting the chosen variant declares (nn/settings.h), with its
// value. The keys are documented in docs/checkpoints.md. Older checkpoints load as they were trained:
// without the norm, attention and ffn keys, with the built-in components (layernorm, softmax, dense); with
// the settings as top-level keys (each declared with its old_key, e.g. layernorm's eps as "layer_norm_eps")
// or without them, read onto the chosen variants' settings or their defaults.
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "nn/classifier.h"
#include "nn/language_model.h"

namespace tapegrad::nn {

/// config.json's object (model_config_json), for trainer.json's "model".
void to_json(nlohmann::json& j, const ClassifierOptions& options);
/// The strict reading of model_options_from_json, naming "config.json" in errors.
void from_json(const nlohmann::json& j, ClassifierOptions& options);

}  // namespace tapegrad::nn

namespace tapegrad {

/// The config.json keys an older checkpoint may lack; reading one takes the default for each.
const std::set<std::string>& model_keys_added_later();


/// config.json of a classifier.
nlohmann::json model_config_json(const nn::ClassifierOptions& options);

/// config.json of a language model: "kind": "language_model", then the classifier's keys but those it has no
/// use for (num_classes, pool, final_norm: always, pad_id: none), the settings with them, and
/// "tie_embeddings" (a boolean).
nlohmann::json language_model_config_json(const nn::LanguageModelOptions& options);

/// The inverse of language_model_config_json, read as strictly as a classifier's (model_options_from_json)
/// and validated as a language model; "kind" must be "language_model", and a classifier's own keys
/// (num_classes, pool, final_norm, pad_id) are refused. "tie_embeddings", added later, may be absent (an
/// older file: false) and must otherwise be a boolean; "tokenizer_digest" (tokenizer_digest_of) is checked and
/// left to the caller. IOError naming `file` and the key.
nn::LanguageModelOptions language_model_options_from_json(const nlohmann::json& config, const std::string& file,
                                                          const std::string& prefix = "");

/// config.json's key for the digest of the tokenizer a language model was trained with (Tokenizer::digest):
/// written with every checkpoint that holds a tokenizer, compared with its tokenizer.json by every reader
/// (load_language_model). Files from before it lack it.
inline constexpr const char* kTokenizerDigestKey = "tokenizer_digest";
/// The recorded digest of a language model's config.json object: 16 lowercase hex digits, or "" when the key
/// is absent (an older file); anything else is an IOError naming `file` and the key.
std::string tokenizer_digest_of(const nlohmann::json& config, const std::string& file, const std::string& prefix = "");

/// Reads a language model's config.json (a regular file or a pipe, at most 16 MiB) and parses it.
nn::LanguageModelOptions read_language_model_config(const std::string& path);

/// config.json's "kind" of a classifier (the key is optional: files from before kinds hold classifiers).
inline constexpr const char* kClassifierKind = "classifier";
/// config.json's "kind" of a language model (language_model_config_json).
inline constexpr const char* kLanguageModelKind = "language_model";
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
