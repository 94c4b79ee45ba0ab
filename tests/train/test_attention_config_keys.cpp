// config.json keys of the attention options (causal, temperature): written, read back, and optional, so
// that a checkpoint from before them loads with bidirectional attention at τ = 1.
#include <catch2/catch.hpp>
#include <string>

#include "train/checkpoint/model_config.h"

using namespace tapegrad;

namespace {

nn::ClassifierOptions tiny() {
  nn::ClassifierOptions o;
  o.vocab_size = 10;
  o.d_model = 8;
  o.n_heads = 2;
  return o;
}

}  // namespace

TEST_CASE("checkpoints: causal and temperature round-trip through config.json") {
  nn::ClassifierOptions o = tiny();
  o.causal = true;
  o.temperature = 0.5;
  const nlohmann::json config = model_config_json(o);
  CHECK(config.at("causal") == true);
  CHECK(config.at("temperature") == 0.5);
  const nn::ClassifierOptions read = parse_model_config(config.dump(), "config.json");
  CHECK(read.causal);
  CHECK(read.temperature == 0.5);
}

TEST_CASE("checkpoints: a config.json without causal and temperature loads with the defaults") {
  nn::ClassifierOptions o = tiny();
  nlohmann::json config = model_config_json(o);
  config.erase("causal");
  config.erase("temperature");
  const nn::ClassifierOptions read = parse_model_config(config.dump(), "config.json");
  CHECK_FALSE(read.causal);
  CHECK(read.temperature == 1.0);
  config["temperature"] = 0.0;
  CHECK_THROWS_WITH(parse_model_config(config.dump(), "config.json"), Catch::Contains("temperature"));
}
