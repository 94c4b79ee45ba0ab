#pragma once
// `tapegrad bench`: timed training steps of a SequenceClassifier on a fixed batch, or of a LanguageModel on
// random windows of a fixed text, with the figures that say how close they come to the machine (model
// FLOP/s against a measured FMA peak), the BLAS kernels, threads, memory and heap allocations.
// docs/performance.md explains every figure.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/named_registry.h"
#include "autograd/profile.h"
#include "train/cli/machine.h"

namespace tapegrad {

struct BenchConfig {
  std::string name = "custom", help = {};
  int64_t d_model = 64, heads = 4, d_ff = 128, layers = 2, seq = 32, batch = 64, vocab = 11, classes = 8;
  // The language model's step (nn/language_model.h: pre-LN, GELU, learned positions, causal, the loss at
  // every position) on windows of seq + 1 tokens; classes is not read. False: the classifier's step.
  bool language_model = false;
  int64_t warmup = 20, steps = 200, repeats = 5;
  int threads = 0;  // 0: every core
  bool profile = false;  // after the timed steps, as many again profiled (profile.h)
  bool scaling = false;  // after the timed steps, chunks on 1 thread and on `threads` alternated
  std::string activation_checkpointing = "auto";  // as train's flag: auto, on or off
};

/// Adds a named configuration (`bench --config <name>`); an empty name or one registered before is a
/// ValueError. Returns true, so that a file registers at load time.
bool register_bench_config(BenchConfig config);
/// The registered configurations: "small" (d_model 64, 4 heads, d_ff 128, 2 layers, T 32, batch 64),
/// "medium" (d_model 256, 8 heads, d_ff 1024, 4 layers, T 128, batch 32), "long" (d_model 256, 4 heads,
/// d_ff 1024, 2 layers, T 2048, batch 2) and "lm" (a character language model, pre-LN and GELU:
/// d_model 128, 4 heads, d_ff 512, 4 layers, T 128, batch 32, vocab 96) first.
const NamedRegistry<BenchConfig>& bench_configs();
/// A copy of the configuration registered as name; a ValueError "--config: unknown configuration 'x'
/// (registered: small, medium, long or lm)" for another name.
BenchConfig bench_config(const std::string& name);

/// Refuses, naming `tapegrad bench`'s flags (train's names: --ff, --context-length, --batch-size), a
/// configuration no run can use: d_model, d_ff and seq outside [1, 2^20] (seq >= 4: a quarter of it is the
/// shortest row), heads outside [1, d_model] or not dividing
/// d_model, layers outside [0, 1024], batch < 1, warmup < 0, steps < 1, threads outside [0, 1024], and a
/// model whose training needs more than the machine's memory (train/training_memory.h).
void validate(const BenchConfig& config);

/// Floating-point operations of one training step on the padded (batch, T) batch, as PyTorch runs it: 3 ×
/// the forward pass's matrix products (forward, and backward's two products per forward product), counting
/// a multiply-add as 2. A language model's attention is counted over all T × T scores, as the classifier's
/// (the usual convention for causal MFU). `rows_and_lengths`, when given, are the (rows, T) of the groups
/// the classifier runs the batch as (nn::length_groups), in place of (batch, T).
double step_flops(const BenchConfig& config, const std::vector<std::pair<int64_t, int64_t>>& rows_and_lengths = {});

struct BenchResult {
  BenchConfig config;
  int64_t parameters = 0;
  // gflops and utilisation count the FLOPs the step runs (step_flops of its length groups), which is less
  // than the padded batch's (padded_flops_per_step) when the classifier groups rows by length.
  double steps_per_second = 0, tokens_per_second = 0, gflops = 0, peak_gflops = 0, utilisation = 0;
  double flops_per_step = 0, padded_flops_per_step = 0;
  double peak_rss_mib = 0, final_loss = 0;
  double heap_allocations_per_step = -1;  // -1: not counted (the allocator is not interposed)
  double storage_mappings_per_step = 0;
  int threads = 1;
  bool checkpointed = false;  // the encoder layers' activations recomputed in backward (all but the last)
  std::string blas, kernels, blas_advice;
  CpuInfo cpu;
  std::vector<OpTimes> profile;  // with config.profile: the profiled steps' rows, summed
  double thread_scaling = 0;     // with config.scaling: rate on `threads` ÷ rate on 1, the median pair
  int64_t profiled_steps = 0;
  double profiled_seconds = 0;   // the profiled steps' wall time
};

/// Runs the benchmark (warm-up, then `steps` timed steps in `repeats` chunks; the median chunk's rate),
/// then, when the configuration asks, the thread scaling (`scaling`) and `steps` profiled steps (`profile`).
BenchResult run_bench(const BenchConfig& config, double peak_gflops);

nlohmann::json to_json(const BenchResult& result);
/// One human-readable block of lines (and the profile's table, when there is one).
std::string describe(const BenchResult& result);
/// The profile as a table: one row an op or phase, by time, with calls, forward and backward milliseconds
/// per step, the share of the step, and the GFLOP/s of its products.
std::string describe_profile(const BenchResult& result);

}  // namespace tapegrad
