#include "train/cli/bench_command.h"

#include <algorithm>
#include <iostream>

#include "autograd/error.h"
#include "train/cli/bench.h"
#include "train/cli/number_flags.h"
#include "train/train_options.h"

namespace tapegrad::cli {

namespace {

/// --config's help: every registered configuration (a user's program lists its own too) with its sizes.
std::string config_help() {
  std::string help = "Named configurations, comma-separated:";
  for (const BenchConfig& config : bench_configs().entries()) help += cat("\n  ", config.name, ": ", config.help);
  return help;
}

}  // namespace

void add_bench(CLI::App& app, BenchFlags& f) {
  auto* cmd = app.add_subcommand("bench", "Time training steps of named model sizes (see docs/performance.md)");
  cmd->add_option("--config", f.configs, config_help())->delimiter(',')->capture_default_str();
  // Each override given replaces its field in every configuration; the others keep the configuration's. The
  // model flags have train's names; bench's older names stay as hidden aliases (--d-ff, --seq, --batch), so
  // that scripts written for them keep working.
  struct Override {
    std::vector<CLI::Option*> options;  // the flag and its alias, if any
    const int64_t* value;
    int64_t BenchConfig::*field;
    bool given() const {
      return std::any_of(options.begin(), options.end(), [](const CLI::Option* o) { return o->count() > 0; });
    }
  };
  const auto override_option = [&](const char* flag, int64_t& value, int64_t BenchConfig::*field, std::string help,
                                   const char* alias = nullptr) {
    if (alias) help += cat(" (also ", alias, ")");
    Override o{{add_integer_option(cmd, flag, value, help)}, &value, field};
    if (alias) o.options.push_back(add_integer_option(cmd, alias, value, help)->group(""));
    return o;
  };
  const std::vector<Override> overrides = {
      override_option("--d-model", f.d_model, &BenchConfig::d_model, "Override d_model"),
      override_option("--heads", f.heads, &BenchConfig::heads, "Override the number of heads"),
      override_option("--ff", f.d_ff, &BenchConfig::d_ff, "Override the feed-forward width d_ff", "--d-ff"),
      override_option("--layers", f.layers, &BenchConfig::layers, "Override the number of layers"),
      override_option("--context-length", f.seq, &BenchConfig::seq, "Override the sequence length T", "--seq"),
      override_option("--batch-size", f.batch, &BenchConfig::batch, "Override the batch size", "--batch"),
      override_option("--warmup", f.warmup, &BenchConfig::warmup, "Override the untimed warm-up steps"),
      override_option("--steps", f.steps, &BenchConfig::steps, "Override the timed steps")};
  add_integer_option(cmd, "--threads", f.threads, "Threads (0: every core)")->capture_default_str();
  cmd->add_option("--activation-checkpointing", f.activation_checkpointing,
                  cat("Recompute the encoder layers' activations in backward, as train's flag (auto: from ",
                      kCheckpointFromPositions, " positions on)"))
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_flag("--json", f.json, "One JSON line per configuration");
  cmd->add_flag("--profile", f.profile,
                "Then time the step op by op: a table of each op's forward and backward time, calls, share of "
                "the step and GFLOP/s");
  cmd->add_flag("--scaling", f.scaling,
                "Then alternate chunks of steps on one thread and on --threads: the speed-up, as the median of "
                "the pairs' ratios");
  cmd->callback([&f, overrides, cmd] {
    // Every configuration is built and checked before any is measured: a bad value in the second must not
    // be found after the first has run.
    std::vector<BenchConfig> configs;
    for (const std::string& name : f.configs) {
      BenchConfig config = bench_config(name);
      for (const Override& o : overrides)
        if (o.given()) config.*o.field = *o.value;
      if (cmd->get_option("--steps")->count() > 0)  // no more timed chunks than steps
        config.repeats = std::min<int64_t>(config.repeats, std::max<int64_t>(f.steps, 1));
      config.threads = f.threads;
      config.profile = f.profile;
      config.scaling = f.scaling;
      config.activation_checkpointing = f.activation_checkpointing;
      validate(config);
      configs.push_back(config);
    }
    // Measured before and after each configuration, keeping the best: a neighbour that ran during one
    // measurement would otherwise understate the peak and overstate the utilisation. On a shared 2-core
    // machine one measurement found a single core's peak (98 against 186 GFLOP/s) and `medium` ran at
    // "104%" of it; `make bench` runs each configuration in a process of its own, so one measurement
    // before the steps was all it had.
    double peak = 0;
    for (const BenchConfig& config : configs) {
      peak = std::max(peak, measure_fma_peak_gflops(f.threads));
      BenchResult result = run_bench(config, peak);
      peak = std::max(peak, measure_fma_peak_gflops(f.threads));
      result.peak_gflops = peak;
      result.utilisation = result.gflops / peak;
      if (f.json) std::cout << to_json(result).dump() << std::endl;
      else std::cout << describe(result) << std::flush;
    }
  });
}

}  // namespace tapegrad::cli
