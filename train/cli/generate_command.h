#pragma once
// `tapegrad generate`: text from a language model's checkpoint, continuing a prompt one token at a time
// (nn/generation.h: temperature, top-k, top-p, the KV cache), printed as the tokens come.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "nn/generation.h"

namespace tapegrad::cli {

struct GenerateFlags {
  std::string checkpoint, prompt;
  int64_t max_new_tokens = 200;
  nn::SamplingOptions sampling;
  uint64_t seed = 0;
  bool no_cache = false, json = false;
};

void add_generate(CLI::App& app, GenerateFlags& flags);

}  // namespace tapegrad::cli
