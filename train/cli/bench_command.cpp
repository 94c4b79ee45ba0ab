#include "train/cli/bench_command.h"

#include <algorithm>
#include <iostream>

#include "autograd/error.h"
#include "train/cli/bench.h"
#include "train/cli/number_flags.h"

namespace tapegrad::cli {

void add_bench(CLI::App& app, BenchFlags& f) {
  auto* cmd = app.add_subcommand("bench", "Time training steps of named model sizes (see docs/performance.md)");
  cmd->add_option("--config", f.configs, cat("Named configurations, comma-separated: ", bench_config_names()))
      ->delimiter(',')
      ->capture_default_str();
  // Each override given replaces its field in every configuration; the others keep the configuration's.
  struct Override {
    CLI::Option* option;
    const int64_t* value;
    int64_t BenchConfig::*field;
  };
  const auto override_option = [&](const char* flag, int64_t& value, int64_t BenchConfig::*field, const char* help) {
    return Override{add_integer_option(cmd, flag, value, help), &value, field};
  };
  const std::vector<Override> overrides = {
      override_option("--d-model", f.d_model, &BenchConfig::d_model, "Override d_model"),
      override_option("--heads", f.heads, &BenchConfig::heads, "Override the number of heads"),
      override_option("--d-ff", f.d_ff, &BenchConfig::d_ff, "Override d_ff"),
      override_option("--layers", f.layers, &BenchConfig::layers, "Override the number of layers"),
      override_option("--seq", f.seq, &BenchConfig::seq, "Override the sequence length T"),
      override_option("--batch", f.batch, &BenchConfig::batch, "Override the batch size"),
      override_option("--warmup", f.warmup, &BenchConfig::warmup, "Override the untimed warm-up steps"),
      override_option("--steps", f.steps, &BenchConfig::steps, "Override the timed steps")};
  add_integer_option(cmd, "--threads", f.threads, "Threads (0: every core)")->capture_default_str();
  cmd->add_flag("--json", f.json, "One JSON line per configuration");
  cmd->callback([&f, overrides, cmd] {
    // Every configuration is built and checked before any is measured: a bad value in the second must not
    // be found after the first has run.
    std::vector<BenchConfig> configs;
    for (const std::string& name : f.configs) {
      BenchConfig config = bench_config(name);
      for (const Override& o : overrides)
        if (o.option->count() > 0) config.*o.field = *o.value;
      if (cmd->get_option("--steps")->count() > 0)  // no more timed chunks than steps
        config.repeats = std::min<int64_t>(config.repeats, std::max<int64_t>(f.steps, 1));
      config.threads = f.threads;
      validate(config);
      configs.push_back(config);
    }
    // Measured again before each configuration, keeping the best: a neighbour that ran during one
    // measurement would otherwise understate the peak and overstate every utilisation after it.
    double peak = 0;
    for (const BenchConfig& config : configs) {
      peak = std::max(peak, measure_fma_peak_gflops(f.threads));
      const BenchResult result = run_bench(config, peak);
      if (f.json) std::cout << to_json(result).dump() << std::endl;
      else std::cout << describe(result) << std::flush;
    }
  });
}

}  // namespace tapegrad::cli
