#pragma once
// `tapegrad bench`: training steps of named model sizes timed, against the measured FMA peak.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace tapegrad::cli {

struct BenchFlags {
  // `long` (about a minute) and `lm` run when asked for by name
  std::vector<std::string> configs{"small", "medium"};
  int64_t d_model = 0, heads = 0, d_ff = 0, layers = 0, seq = 0, batch = 0, warmup = 0, steps = 0;  // when given
  int threads = 0;
  bool json = false, profile = false, scaling = false;
  std::string activation_checkpointing = "auto";
};

void add_bench(CLI::App& app, BenchFlags& flags);

}  // namespace tapegrad::cli
