// `tapegrad bench`'s result as JSON and as text (bench.h).
#include <cmath>
#include <cstdio>
#include <string>

#include "train/cli/bench.h"

namespace tapegrad {

namespace {

/// The profile's rows per step, as JSON (null without a profile).
nlohmann::json profile_json(const BenchResult& r) {
  if (r.profile.empty()) return nullptr;
  nlohmann::json rows = nlohmann::json::array();
  const double steps = static_cast<double>(r.profiled_steps);
  for (const OpTimes& op : r.profile)
    rows.push_back({{"op", op.name},
                    {"calls_per_step", static_cast<double>(op.calls) / steps},
                    {"forward_ms_per_step", 1e3 * op.forward_seconds / steps},
                    {"backward_ms_per_step", 1e3 * op.backward_seconds / steps},
                    {"gflop_per_step", op.flops / steps / 1e9}});
  return {{"steps", r.profiled_steps}, {"ms_per_step", 1e3 * r.profiled_seconds / steps}, {"ops", rows}};
}

}  // namespace

nlohmann::json to_json(const BenchResult& r) {
  const BenchConfig& c = r.config;
  return {{"config", c.name},
          {"model", c.language_model ? "language_model" : "classifier"},
          {"vocab", c.vocab},
          {"d_model", c.d_model},
          {"heads", c.heads},
          {"d_ff", c.d_ff},
          {"layers", c.layers},
          {"seq", c.seq},
          {"batch", c.batch},
          {"parameters", r.parameters},
          {"steps", c.steps},
          {"steps_per_second", r.steps_per_second},
          {"tokens_per_second", r.tokens_per_second},
          {"gflop_per_step", r.flops_per_step / 1e9},
          {"padded_gflop_per_step", r.padded_flops_per_step / 1e9},
          {"gflops", r.gflops},
          {"peak_gflops", r.peak_gflops},
          {"model_flop_utilisation", r.utilisation},
          {"threads", r.threads},
          {"activation_checkpointing", r.checkpointed},
          {"blas", r.blas},
          {"blas_kernels", r.kernels},
          {"blas_advice", r.blas_advice},
          {"peak_rss_mib", r.peak_rss_mib},
          {"heap_allocations_per_step", r.heap_allocations_per_step < 0 ? nlohmann::json() : nlohmann::json(r.heap_allocations_per_step)},
          {"storage_mappings_per_step", r.storage_mappings_per_step},
          {"final_loss", r.final_loss},
          {"cpu", r.cpu.model},
          {"vector_bits", r.cpu.vector_bits},
          {"instruction_set", r.cpu.instruction_set},
          {"profile", profile_json(r)},
          {"thread_scaling", c.scaling ? nlohmann::json(r.thread_scaling) : nlohmann::json()}};
}

std::string describe(const BenchResult& r) {
  const BenchConfig& c = r.config;
  char text[2048];
  const std::string heap = r.heap_allocations_per_step < 0 ? std::string("not counted")
                                                           : cat(static_cast<int64_t>(r.heap_allocations_per_step + 0.5));
  // When the rows run in length groups, the padded batch's FLOPs too (PyTorch's step runs those).
  const std::string padded = r.flops_per_step < r.padded_flops_per_step
                                 ? cat(" run (", std::lround(r.padded_flops_per_step / 1e8) / 10.0, " for the padded batch)")
                                 : std::string();
  std::snprintf(text, sizeof text,
                "%s: %sd_model %lld, %lld heads, d_ff %lld, %lld layers, T %lld, batch %lld (%lld parameters)%s\n"
                "  %.2f steps/s, %.0f tokens/s, %.1f GFLOP/s of %.1f GFLOP per step%s: %.1f%% of the FMA peak (%.0f GFLOP/s)\n"
                "  CPU: %s, %d-bit vectors (%s)\n"
                "  %d thread%s; BLAS: %s, kernels %s\n"
                "  peak RSS %.1f MiB; per step: %s heap allocations, %.2f new buffer mappings\n",
                c.name.c_str(), c.language_model ? cat("language model, vocab ", c.vocab, ", ").c_str() : "",
                static_cast<long long>(c.d_model), static_cast<long long>(c.heads),
                static_cast<long long>(c.d_ff), static_cast<long long>(c.layers), static_cast<long long>(c.seq),
                static_cast<long long>(c.batch), static_cast<long long>(r.parameters),
                r.checkpointed ? "; activations recomputed in backward (--activation-checkpointing)" : "", r.steps_per_second,
                r.tokens_per_second, r.gflops, r.flops_per_step / 1e9, padded.c_str(), 100 * r.utilisation, r.peak_gflops,
                r.cpu.model.c_str(), r.cpu.vector_bits, r.cpu.instruction_set.c_str(), r.threads, r.threads == 1 ? "" : "s",
                r.blas.c_str(), r.kernels.c_str(), r.peak_rss_mib, heap.c_str(), r.storage_mappings_per_step);
  std::string out = text;
  if (!r.blas_advice.empty()) out += "  note: " + r.blas_advice + "\n";
  if (c.scaling) {
    std::snprintf(text, sizeof text, "  %d threads against 1: %.2fx (median of %lld alternated pairs of %lld-step chunks)\n",
                  r.threads, r.thread_scaling, static_cast<long long>(c.repeats),
                  static_cast<long long>(std::max<int64_t>(1, c.steps / c.repeats)));
    out += text;
  }
  if (!r.profile.empty()) out += describe_profile(r);
  return out;
}

std::string describe_profile(const BenchResult& r) {
  const double steps = static_cast<double>(r.profiled_steps), step_ms = 1e3 * r.profiled_seconds / steps;
  std::vector<OpTimes> rows = r.profile;
  std::sort(rows.begin(), rows.end(), [](const OpTimes& a, const OpTimes& b) {
    return a.forward_seconds + a.backward_seconds > b.forward_seconds + b.backward_seconds;
  });
  char line[256];
  std::snprintf(line, sizeof line, "  profile of %lld steps: %.2f ms a step (times per step)\n",
                static_cast<long long>(r.profiled_steps), step_ms);
  std::string out = line;
  std::snprintf(line, sizeof line, "  %-24s %7s %10s %11s %9s %6s %9s\n", "op", "calls", "forward ms", "backward ms",
                "total ms", "share", "GFLOP/s");
  out += line;
  double booked = 0;
  for (const OpTimes& op : rows) {
    const double forward = 1e3 * op.forward_seconds / steps, backward = 1e3 * op.backward_seconds / steps;
    const double total = forward + backward;
    booked += total;
    const double seconds = op.forward_seconds + op.backward_seconds;
    const std::string gflops = op.flops > 0 ? cat(static_cast<int64_t>(op.flops / seconds / 1e9 + 0.5)) : "";
    std::snprintf(line, sizeof line, "  %-24s %7.1f %10.3f %11.3f %9.3f %5.1f%% %9s\n", op.name.c_str(),
                  static_cast<double>(op.calls) / steps, forward, backward, total, 100 * total / step_ms, gflops.c_str());
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-24s %7s %10s %11s %9.3f %5.1f%%\n", "(outside the table)", "", "", "",
                step_ms - booked, 100 * (step_ms - booked) / step_ms);
  return out + line;
}

}  // namespace tapegrad
