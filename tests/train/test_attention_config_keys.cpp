// config.json's settings of the components (nn/settings.h): written under "settings" by kind, read back, and
// older files, with the settings as top-level keys or without them, loading as they were trained.
#include <catch2/catch.hpp>
#include <string>

#include "train/checkpoint/model_config.h"
#include "train/train_options.h"

using namespace tapegrad;

namespace {

nn::ClassifierOptions tiny() {
  nn::ClassifierOptions o;
  o.vocab_size = 10;
  o.d_model = 8;
  o.n_heads = 2;
  return o;
}

/// A config.json text as an older tapegrad wrote it: the fields every one has had, and `more`.
std::string old_config(const std::string& more) {
  return cat(R"({"vocab_size": 10, "d_model": 8, "n_heads": 2, "d_ff": 128, "n_layers": 2, "context_length": 64,
                 "num_classes": 2, "dropout": 0.1, "norm_first": false, "final_norm": false, "pad_id": 0,
                 "positional": "learned", "pool": "mean", "activation": "relu", )",
             more, "}");
}

}  // namespace

TEST_CASE("checkpoints: causal and temperature round-trip through config.json under settings.attention") {
  nn::ClassifierOptions o = tiny();
  o.settings.set("attention", "causal", true);
  o.settings.set("attention", "temperature", 0.5);
  const nlohmann::json config = model_config_json(o);
  CHECK(config.at("settings").at("attention").at("causal") == true);
  CHECK(config.at("settings").at("attention").at("temperature") == 0.5);
  CHECK(config.at("settings").at("norm").at("eps") == 1e-5);  // every setting of the chosen variants, defaults too
  CHECK_FALSE(config.at("settings").contains("ffn"));          // dense declares none
  const nn::ClassifierOptions read = parse_model_config(config.dump(), "config.json");
  CHECK(nn::chosen_settings<nn::AttentionKind>(read).flag("causal"));
  CHECK(nn::chosen_settings<nn::AttentionKind>(read).real("temperature") == 0.5);
  CHECK(model_config_json(read) == config);
}

TEST_CASE("checkpoints: a config.json without settings loads with the defaults, and refuses a bad one by key") {
  nn::ClassifierOptions o = tiny();
  nlohmann::json config = model_config_json(o);
  config.erase("settings");
  const nn::ClassifierOptions read = parse_model_config(config.dump(), "config.json");
  CHECK_FALSE(nn::chosen_settings<nn::AttentionKind>(read).flag("causal"));
  CHECK(nn::chosen_settings<nn::AttentionKind>(read).real("temperature") == 1.0);
  config["temperature"] = 0.0;  // an older file's key, mapped onto the setting and checked by its declaration
  CHECK_THROWS_WITH(parse_model_config(config.dump(), "config.json"),
                    Catch::Contains("config.json: attention.temperature must be a finite number in [0.001, 1000], got 0"));
}

TEST_CASE("checkpoints: older config.json texts load, their settings mapped onto the chosen variants") {
  // Before the components: layer_norm_eps only.
  const nn::ClassifierOptions first =
      parse_model_config(old_config(R"("layer_norm_eps": 1e-06)"), "config.json");
  CHECK(first.attention == "softmax");
  CHECK(first.ffn == "dense");
  CHECK(nn::chosen_settings<nn::NormKind>(first).real("eps") == 1e-6);
  // With moe, causal and the temperature as top-level keys.
  const nn::ClassifierOptions moe = parse_model_config(
      old_config(R"("layer_norm_eps": 1e-05, "attention": "softmax", "norm": "layernorm", "ffn": "moe",
                    "causal": true, "temperature": 0.5, "experts": 3, "top_k": 1, "moe_aux_weight": 0.05)"),
      "config.json");
  const nn::VariantSettings ffn = nn::chosen_settings<nn::FeedForwardKind>(moe);
  CHECK(ffn.integer("experts") == 3);
  CHECK(ffn.integer("top_k") == 1);
  CHECK(ffn.real("aux_weight") == 0.05);
  CHECK(nn::chosen_settings<nn::AttentionKind>(moe).flag("causal"));
  CHECK(nn::chosen_settings<nn::AttentionKind>(moe).real("temperature") == 0.5);
  // The moe keys of a dense model (written by every older tapegrad) had no effect and are dropped.
  const nn::ClassifierOptions dense = parse_model_config(
      old_config(R"("layer_norm_eps": 1e-05, "attention": "linear", "norm": "layernorm", "ffn": "dense",
                    "causal": false, "temperature": 1.0, "experts": 4, "top_k": 2, "moe_aux_weight": 0.01)"),
      "config.json");
  CHECK(dense.settings.find("ffn", "top_k") == nullptr);
  CHECK(dense.settings.find("attention", "temperature") == nullptr);  // linear attention has none
  CHECK(dense.settings.find("attention", "causal") != nullptr);
  // An old key's type is still checked, by its declaration.
  CHECK_THROWS_WITH(parse_model_config(old_config(R"("layer_norm_eps": true)"), "config.json"),
                    Catch::Contains("config.json: 'layer_norm_eps' must be a number, got true"));
}

TEST_CASE("checkpoints: config.json's settings refuse unknown keys, old keys beside them, and a variant's not chosen") {
  const nlohmann::json config = model_config_json(tiny());
  const auto refused = [&](nlohmann::json edited) {
    try {
      parse_model_config(edited.dump(), "config.json");
    } catch (const IOError& e) {
      return std::string(e.what());
    }
    return std::string("loaded");
  };
  nlohmann::json c = config;
  c["settings"]["norm"]["epsilon"] = 1e-5;
  CHECK_THAT(refused(c), Catch::Contains("config.json: unknown key \"settings.norm.epsilon\""));
  c = config;
  c["settings"]["decoder"] = nlohmann::json::object();
  CHECK_THAT(refused(c), Catch::Contains("unknown key \"settings.decoder\""));
  c = config;
  c["top_k"] = 2;  // an old key beside the settings object
  CHECK_THAT(refused(c), Catch::Contains("unknown key \"top_k\""));
  c = config;
  c["settings"]["ffn"]["top_k"] = 1;
  CHECK_THAT(refused(c), Catch::Contains("config.json: ffn.top_k applies to ffn = moe only, not ffn = dense"));
  c = config;
  c["settings"]["attention"]["causal"] = 1;
  CHECK_THAT(refused(c), Catch::Contains("config.json: 'settings.attention.causal' must be true or false, got 1"));
}

TEST_CASE("checkpoints: trainer.json's model of an older run, with the settings as top-level keys, still reads") {
  TrainOptions options;
  options.model.vocab_size = 10;
  options.model.ffn = "moe";
  options.model.settings.set("ffn", "top_k", int64_t{1});
  nlohmann::json saved = to_json(options);
  CHECK(saved.at("model").at("settings").at("ffn").at("top_k") == 1);
  // As an older tapegrad wrote it: the settings at the model's top level.
  nlohmann::json& model = saved.at("model");
  model.erase("settings");
  model["experts"] = 4, model["top_k"] = 1, model["moe_aux_weight"] = 0.02, model["causal"] = true;
  model["temperature"] = 1.0, model["layer_norm_eps"] = 1e-5;
  const TrainOptions read = train_options_from_json(saved, "trainer.json");
  const nn::VariantSettings ffn = nn::chosen_settings<nn::FeedForwardKind>(read.model);
  CHECK(ffn.integer("top_k") == 1);
  CHECK(ffn.real("aux_weight") == 0.02);
  CHECK(nn::chosen_settings<nn::AttentionKind>(read.model).flag("causal"));
  model["top_k"] = 9;  // checked as config.json's are, naming the file and the model
  CHECK_THROWS_WITH(train_options_from_json(saved, "trainer.json"),
                    Catch::Contains("trainer.json: 'options.model': ffn.top_k = 9 is outside [1, ffn.experts = 4]"));
}
