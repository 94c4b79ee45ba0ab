#include "train/checkpoint/model_config.h"

#include <algorithm>

#include "train/io/read_file.h"
#include "train/io/strict_json.h"

namespace tapegrad {

using nlohmann::json;

namespace {

/// The one list of ClassifierOptions' plain fields (all but the settings): f(key, field) for each, in
/// config.json's order; the writer and the reader both walk it.
template <class Options, class F>
void for_each_field(Options& o, F&& f) {
  f("vocab_size", o.vocab_size), f("d_model", o.d_model), f("n_heads", o.n_heads), f("d_ff", o.d_ff);
  f("n_layers", o.n_layers), f("context_length", o.context_length), f("num_classes", o.num_classes);
  f("dropout", o.dropout), f("norm_first", o.norm_first), f("final_norm", o.final_norm), f("pad_id", o.pad_id);
  f("positional", o.positional), f("attention", o.attention), f("norm", o.norm), f("ffn", o.ffn);
  f("pool", o.pool), f("activation", o.activation);
}

json plain_fields(const nn::ClassifierOptions& o) {
  json j = json::object();
  for_each_field(o, [&j](const char* key, const auto& field) { j[key] = field; });
  return j;
}

/// Every kind's chosen variant's settings, for writing and for mapping old keys.
std::vector<std::pair<std::string, nn::VariantSettings>> chosen_settings(const nn::ClassifierOptions& o) {
  return {{"positional", nn::chosen_settings<nn::PositionalKind>(o)},
          {"attention", nn::chosen_settings<nn::AttentionKind>(o)},
          {"norm", nn::chosen_settings<nn::NormKind>(o)},
          {"ffn", nn::chosen_settings<nn::FeedForwardKind>(o)},
          {"pool", nn::chosen_settings<nn::PoolKind>(o)},
          {"activation", nn::chosen_settings<nn::ActivationKind>(o)}};
}

/// One value read with the exact JSON type the declaration has.
nn::SettingValue read_setting(JsonFields& fields, const char* key, nn::SettingType type) {
  switch (type) {
    case nn::SettingType::integer: return fields.integer(key);
    case nn::SettingType::real: return fields.number(key);
    case nn::SettingType::flag: return fields.boolean(key);
  }
  return false;
}

/// "settings": {"<kind>": {"<name>": value}}: every setting some variant of the kind declares, read by its
/// declared type (nn::validate then refuses one the chosen variant does not declare, naming it); a kind or a
/// name that nothing declares is an unknown key.
void read_settings(const json& object, nn::ClassifierOptions& o, const std::string& file, const std::string& prefix) {
  JsonFields kinds(object, file, prefix);
  const std::vector<nn::DeclaredSetting> declared = nn::declared_settings();
  for (const char* kind : {"positional", "attention", "norm", "ffn", "pool", "activation"}) {
    if (!kinds.has(kind)) continue;
    JsonFields fields(kinds.object(kind), file, prefix + kind + ".");
    for (const nn::DeclaredSetting& d : declared)
      if (d.kind == kind && fields.has(d.spec.name.c_str()))
        o.settings.set(kind, d.spec.name, read_setting(fields, d.spec.name.c_str(), d.spec.type));
    fields.refuse_unknown();
  }
  kinds.refuse_unknown();
}

/// The top-level keys under which older files kept the settings (SettingSpec::old_key), with the kind and
/// the setting each is now.
std::vector<nn::DeclaredSetting> old_setting_keys() {
  std::vector<nn::DeclaredSetting> old;
  for (const nn::DeclaredSetting& d : nn::declared_settings())
    if (!d.spec.old_key.empty()) old.push_back(d);
  return old;
}

/// An older file's top-level setting keys onto the chosen variants' settings. A component name nothing
/// registered maps nothing here: nn::validate names it.
void map_old_setting_keys(JsonFields& top, nn::ClassifierOptions& o) {
  for (const nn::DeclaredSetting& d : old_setting_keys()) {
    if (!top.has(d.spec.old_key.c_str())) continue;
    const std::string& chosen = nn::chosen_variant(o, d.kind);
    if (std::find(d.variants.begin(), d.variants.end(), chosen) != d.variants.end())
      o.settings.set(d.kind, d.spec.name, read_setting(top, d.spec.old_key.c_str(), d.spec.type));
  }
}

}  // namespace

void nn::to_json(json& j, const ClassifierOptions& options) { j = model_config_json(options); }
void nn::from_json(const json& j, ClassifierOptions& options) { options = model_options_from_json(j, "config.json"); }

json model_config_json(const nn::ClassifierOptions& options) {
  json j = plain_fields(options);
  json settings = json::object();
  for (const auto& [kind, chosen] : chosen_settings(options))
    for (const auto& [spec, value] : chosen.all()) {
      json& slot = settings[kind][spec->name];  // not captured below: clang 14 cannot capture a structured binding
      std::visit([&slot](const auto& v) { slot = v; }, value);
    }
  j["settings"] = settings;
  return j;
}

json language_model_config_json(const nn::LanguageModelOptions& options) {
  const json body = model_config_json(nn::body_options(options));
  json j = {{"kind", kLanguageModelKind}};
  for (const auto& [key, value] : body.items())
    if (key != "num_classes" && key != "pool" && key != "final_norm" && key != "pad_id") j[key] = value;
  j["settings"].erase("pool");
  j["tie_embeddings"] = options.tie_embeddings;  // a language model's own key: a classifier has no head to tie
  return j;
}

const std::set<std::string>& model_keys_added_later() {
  // The keys that came after the first checkpoints: the norm, attention and ffn components. Older
  // checkpoints lack them and were trained with the built-in variants. (The settings, also added later,
  // are read apart: model_options_from_json.)
  static const std::set<std::string> keys = {"attention", "norm", "ffn"};
  return keys;
}

nn::ClassifierOptions model_options_from_json(const json& config, const std::string& file, const std::string& prefix) {
  JsonFields top(config, file, prefix);  // refuses a config that is no object
  if (top.has("kind")) {  // the model kind (trainable_model.h); absent in the files from before kinds
    const std::string kind = top.string("kind");
    if (kind != kClassifierKind)
      throw IOError(cat(file, ": ", top.quoted("kind"), " is '", kind, "': this tapegrad rebuilds only '",
                        kClassifierKind, "' models from a config.json"));
  }
  json plain = config;
  plain.erase("kind");
  const bool has_settings = plain.contains("settings");
  plain.erase("settings");
  if (!has_settings)  // an older file: its settings, if any, are top-level keys, mapped once the variants are known
    for (const nn::DeclaredSetting& d : old_setting_keys()) plain.erase(d.spec.old_key);
  static const json example = plain_fields(nn::ClassifierOptions());
  const json checked = checked_like(plain, example, file, prefix, model_keys_added_later());
  nn::ClassifierOptions options;
  for_each_field(options, [&checked](const char* key, auto& field) { checked.at(key).get_to(field); });
  if (has_settings) {
    read_settings(top.object("settings"), options, file, prefix + "settings.");
  } else {
    map_old_setting_keys(top, options);
  }
  try {
    nn::validate(options, prefix.empty() ? file : cat(file, ": '", prefix.substr(0, prefix.size() - 1), "'"));
  } catch (const ValueError& e) {
    throw IOError(e.what());
  }
  return options;
}

nn::LanguageModelOptions language_model_options_from_json(const json& config, const std::string& file,
                                                          const std::string& prefix) {
  JsonFields top(config, file, prefix);
  if (const std::string kind = top.string("kind"); kind != kLanguageModelKind)
    throw IOError(cat(file, ": ", top.quoted("kind"), " is ", in_quotes(kind), ", not ", in_quotes(kLanguageModelKind)));
  json body = config;
  body.erase("kind");
  // Added after the first language models, which had untied heads: absent reads as false. Present, it must
  // be a JSON boolean (not 1, not "true").
  const bool tie_embeddings = top.has("tie_embeddings") && top.boolean("tie_embeddings");
  body.erase("tie_embeddings");
  tokenizer_digest_of(config, file, prefix);  // the tokenizer's, not the model's: checked here, compared by the loader
  body.erase(kTokenizerDigestKey);
  // What a language model always is, in the classifier's terms (nn::body_options).
  const std::pair<const char*, json> implied[] = {
      {"num_classes", 2}, {"pool", "mean"}, {"final_norm", true}, {"pad_id", -1}};
  for (const auto& [key, value] : implied) {
    if (body.contains(key)) throw IOError(cat(file, ": ", top.quoted(key), " is not a key of a language model"));
    body[key] = value;
  }
  nn::LanguageModelOptions options = nn::language_model_options(model_options_from_json(body, file, prefix));
  options.tie_embeddings = tie_embeddings;
  try {
    nn::validate(options, prefix.empty() ? file : cat(file, ": '", prefix.substr(0, prefix.size() - 1), "'"));
  } catch (const ValueError& e) {
    throw IOError(e.what());
  }
  return options;
}

std::string tokenizer_digest_of(const json& config, const std::string& file, const std::string& prefix) {
  JsonFields top(config, file, prefix);
  if (!top.has(kTokenizerDigestKey)) return "";
  const std::string digest = top.string(kTokenizerDigestKey);
  const bool hex = digest.size() == 16 && std::all_of(digest.begin(), digest.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
  if (!hex)
    throw IOError(cat(file, ": ", top.quoted(kTokenizerDigestKey), " must be 16 lowercase hex digits, got \"", digest, "\""));
  return digest;
}

nn::ClassifierOptions parse_model_config(std::string_view text, const std::string& name) {
  // config.json is one object: depth 0 is the object, "settings" at depth 1 holds one object per kind (depth 2).
  return model_options_from_json(parse_json_strictly(text, name, 2), name);
}

nn::ClassifierOptions read_model_config(const std::string& path) {
  return parse_model_config(read_whole_file(path, kJsonFileLimit), path);
}

nn::LanguageModelOptions read_language_model_config(const std::string& path) {
  return language_model_options_from_json(parse_json_strictly(read_whole_file(path, kJsonFileLimit), path, 2), path);
}

}  // namespace tapegrad
