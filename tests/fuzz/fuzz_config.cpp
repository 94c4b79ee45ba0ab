// libFuzzer target: config.json and trainer.json's options on arbitrary text. An accepted config.json
// must survive a round trip through model_config_json and give its parameter count without overflow;
// anything else must be a tapegrad::Error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "autograd/error.h"
#include "train/checkpoint/checkpoint.h"
#include "train/io/strict_json.h"
#include "train/train_options.h"

using namespace tapegrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const nn::ClassifierOptions o = parse_model_config(text, "config.json");
    if (nn::parameter_count(o) <= 0) __builtin_trap();
    const nn::ClassifierOptions again = parse_model_config(model_config_json(o).dump(), "config.json");
    if (model_config_json(again) != model_config_json(o)) __builtin_trap();
  } catch (const Error&) {
  }
  try {  // the same text as trainer.json: {"options": {...}, ...}
    const nlohmann::json state = parse_json_strictly(text, "trainer.json", 4);
    if (state.is_object() && state.contains("options")) {
      const TrainOptions o = train_options_from_json(state["options"], "trainer.json");
      const TrainOptions again = train_options_from_json(to_json(o), "trainer.json");
      if (to_json(again) != to_json(o)) __builtin_trap();
    }
  } catch (const Error&) {
  }
  return 0;
}
