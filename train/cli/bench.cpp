#include "train/cli/bench.h"

#include <immintrin.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <system_error>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/blas.h"
#include "nn/classifier.h"
#include "optim/adam.h"
#include "train/training_memory.h"

// Counted by the tapegrad executable, which interposes the system allocator (train/cli/heap_count.cpp);
// absent from other programs, where allocations are reported as not counted.
extern "C" uint64_t tapegrad_heap_allocations() __attribute__((weak));

namespace tapegrad {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Twelve independent accumulator chains hide the FMA latency (4 cycles) behind two FMA pipes. Each
// iteration is 12 FMAs of `lanes` floats, 2 FLOPs each.
constexpr int kChains = 12;

__attribute__((target("avx512f"))) float fma_chains_avx512(int64_t iterations) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(0.001f * static_cast<float>(c));
  const __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], mul, add);
  alignas(64) float lanes[16];
  float sum = 0;
  for (int c = 0; c < kChains; ++c) {
    _mm512_store_ps(lanes, acc[c]);
    for (float v : lanes) sum += v;
  }
  return sum;
}

__attribute__((target("avx2,fma"))) float fma_chains_avx2(int64_t iterations) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(0.001f * static_cast<float>(c));
  const __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], mul, add);
  alignas(32) float lanes[8];
  float sum = 0;
  for (int c = 0; c < kChains; ++c) {
    _mm256_store_ps(lanes, acc[c]);
    for (float v : lanes) sum += v;
  }
  return sum;
}

// Without FMA (an x86-64 CPU before Haswell): a multiply and an add per lane, 2 FLOPs as well.
float mul_add_chains_sse2(int64_t iterations) {
  __m128 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm_set1_ps(0.001f * static_cast<float>(c));
  const __m128 mul = _mm_set1_ps(0.999999f), add = _mm_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm_add_ps(_mm_mul_ps(acc[c], mul), add);
  alignas(16) float lanes[4];
  float sum = 0;
  for (int c = 0; c < kChains; ++c) {
    _mm_store_ps(lanes, acc[c]);
    for (float v : lanes) sum += v;
  }
  return sum;
}

/// The value of /proc/cpuinfo's first "model name" line; "unknown" without one.
std::string cpu_model_name() {
  std::FILE* file = std::fopen("/proc/cpuinfo", "r");
  if (!file) return "unknown";
  char line[512];
  std::string model = "unknown";
  while (std::fgets(line, sizeof line, file)) {
    const std::string text = line;
    if (text.rfind("model name", 0) != 0) continue;
    const size_t colon = text.find(':');
    if (colon != std::string::npos) model = text.substr(text.find_first_not_of(' ', colon + 1));
    while (!model.empty() && (model.back() == '\n' || model.back() == ' ')) model.pop_back();
    break;
  }
  std::fclose(file);
  return model;
}

/// The peak resident set of the process so far, in MiB.
double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

uint64_t heap_allocations() { return tapegrad_heap_allocations ? tapegrad_heap_allocations() : 0; }

/// The default model of `tapegrad train` at the configuration's size (post-LN, relu, learned positions,
/// mean pooling, no dropout).
nn::ClassifierOptions bench_model(const BenchConfig& c) {
  nn::ClassifierOptions options{c.vocab};
  options.d_model = c.d_model;
  options.n_heads = c.heads;
  options.d_ff = c.d_ff;
  options.n_layers = c.layers;
  options.context_length = c.seq;
  options.num_classes = c.classes;
  options.dropout = 0;
  return options;
}

/// set_num_threads, with a pool the machine cannot start (a process limit: "Resource temporarily
/// unavailable") named by the flag that asked for it.
void start_threads(int threads) {
  try {
    set_num_threads(threads);
  } catch (const std::system_error& e) {
    throw ValueError(cat("--threads ", threads, ": this machine cannot start that many threads (", e.what(),
                         "); ask for fewer"));
  }
}

NamedRegistry<BenchConfig>& registry() {
  static NamedRegistry<BenchConfig> all("configuration", "register_bench_config");
  return all;
}

// One initialiser runs every registration of this file when the library loads.
const bool registered = [] {
  register_bench_config({.name = "small", .help = "d_model 64, 4 heads, d_ff 128, 2 layers, T 32, batch 64"});
  register_bench_config({.name = "medium",
                         .help = "d_model 256, 8 heads, d_ff 1024, 4 layers, T 128, batch 32",
                         .d_model = 256, .heads = 8, .d_ff = 1024, .layers = 4, .seq = 128, .batch = 32,
                         .warmup = 3, .steps = 20});
  // Long sequences, where attention's T² terms dominate (issue 20): 2 048 tokens a row, the rows of a batch
  // from 2 048 down to 543 tokens. A step takes about a second on 2 cores, so 2 warm-up and 50 timed
  // steps (5 chunks of 10) make one `bench --config long` about a minute.
  register_bench_config({.name = "long",
                         .help = "d_model 256, 4 heads, d_ff 1024, 2 layers, T 2048, batch 2",
                         .d_model = 256, .heads = 4, .d_ff = 1024, .layers = 2, .seq = 2048, .batch = 2,
                         .warmup = 2, .steps = 50});
  return true;
}();

}  // namespace

bool register_bench_config(BenchConfig config) { return registry().add(std::move(config)); }

const NamedRegistry<BenchConfig>& bench_configs() { return registry(); }

BenchConfig bench_config(const std::string& name) {
  if (const BenchConfig* config = bench_configs().find(name)) return *config;
  throw ValueError(cat("--config: ", bench_configs().unknown(name)));
}

void validate(const BenchConfig& c) {
  const auto require = [](bool ok, const char* flag, const std::string& rule, int64_t value) {
    if (!ok) throw ValueError(cat(flag, " must be ", rule, ", got ", value));
  };
  constexpr int64_t kMaxWidth = int64_t{1} << 20, kMaxLayers = 1024, kMaxThreads = 1024;
  require(c.d_model >= 1 && c.d_model <= kMaxWidth, "--d-model", cat("in [1, ", kMaxWidth, "]"), c.d_model);
  require(c.heads >= 1 && c.heads <= c.d_model, "--heads", cat("in [1, d_model = ", c.d_model, "]"), c.heads);
  if (c.d_model % c.heads != 0)
    throw ValueError(cat("--d-model ", c.d_model, " is not divisible by --heads ", c.heads,
                         ": each head gets d_model / heads dimensions"));
  require(c.d_ff >= 1 && c.d_ff <= kMaxWidth, "--ff", cat("in [1, ", kMaxWidth, "]"), c.d_ff);
  require(c.layers >= 0 && c.layers <= kMaxLayers, "--layers", cat("in [0, ", kMaxLayers, "]"), c.layers);
  require(c.seq >= 4 && c.seq <= kMaxWidth, "--context-length", cat("in [4, ", kMaxWidth, "] (a quarter of it is the shortest row)"),
          c.seq);
  require(c.batch >= 1, "--batch-size", ">= 1", c.batch);
  require(c.warmup >= 0, "--warmup", ">= 0", c.warmup);
  require(c.steps >= 1, "--steps", ">= 1", c.steps);
  require(c.threads >= 0 && c.threads <= kMaxThreads, "--threads", cat("in [0, ", kMaxThreads, "] (0: every core)"),
          c.threads);
  if (c.vocab < 4 || c.classes < 2 || c.repeats < 1)
    throw ValueError(cat("bench configuration '", c.name, "': needs vocab >= 4, classes >= 2 and repeats >= 1"));
  // The model run_bench builds, as train's memory check sees it: refused before any of it is allocated.
  TrainOptions as_trained;
  as_trained.batch_size = c.batch;
  as_trained.model = bench_model(c);
  check_memory(as_trained, "--batch-size, --context-length, --d-model, --ff or --layers");
}

// Per layer, with N = batch · T token rows, C = d_model, F = d_ff, T the sequence length:
//   q|k|v projection 2·N·C·3C, output projection 2·N·C·C, q kᵀ and P v 2 · 2·batch·T·T·C (over all heads),
//   feed-forward 2 · 2·N·C·F;  plus the head 2·batch·C·classes.  A step is 3 × that (see the header).
double step_flops(const BenchConfig& c) {
  const double N = static_cast<double>(c.batch * c.seq), C = static_cast<double>(c.d_model);
  const double T = static_cast<double>(c.seq), F = static_cast<double>(c.d_ff);
  const double layer = 2 * N * C * 3 * C + 2 * N * C * C + 4 * static_cast<double>(c.batch) * T * T * C + 4 * N * C * F;
  const double head = 2.0 * static_cast<double>(c.batch) * C * static_cast<double>(c.classes);
  return 3 * (static_cast<double>(c.layers) * layer + head);
}

CpuInfo cpu_info() {
  __builtin_cpu_init();
  CpuInfo cpu;
  cpu.model = cpu_model_name();
  if (__builtin_cpu_supports("avx512f")) cpu = {cpu.model, 512, "AVX-512"};
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) cpu = {cpu.model, 256, "AVX2+FMA"};
  else cpu = {cpu.model, 128, "SSE2 (no FMA)"};
  return cpu;
}

double measure_fma_peak_gflops(int threads) {
  const int bits = cpu_info().vector_bits;
  const double flops_per_iteration = 2.0 * kChains * (bits / 32);
  const auto chains = [bits](int64_t iterations) {
    return bits == 512 ? fma_chains_avx512(iterations)
                       : bits == 256 ? fma_chains_avx2(iterations) : mul_add_chains_sse2(iterations);
  };
  const int64_t iterations = 10'000'000;  // about 0.05 s per core
  std::atomic<float> sink{0};
  start_threads(threads);
  const int parts = num_threads();
  // The best of a few trials: a neighbour on a shared machine only ever makes a trial slower.
  double best = 0;
  for (int trial = 0; trial < 5; ++trial) {
    const auto start = Clock::now();
    parallel_for(parts, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) sink = sink + chains(iterations);
    });
    best = std::max(best, flops_per_iteration * static_cast<double>(iterations) * parts / seconds_since(start) / 1e9);
  }
  return best;
}

/// Rate on c.threads ÷ rate on one thread: chunks of `chunk` steps on each, alternated `repeats` times,
/// the median of the pairs' ratios. Each pair sees the same minute of a shared machine, which a ratio
/// of two separate runs does not. Leaves the pool at c.threads.
template <class Step>
double thread_scaling(Step& step, int64_t chunk, const BenchConfig& c) {
  const auto rate = [&](int threads) {
    start_threads(threads);
    step();  // the first step on a new pool makes its threads' scratch
    const auto start = Clock::now();
    for (int64_t i = 0; i < chunk; ++i) step();
    return static_cast<double>(chunk) / seconds_since(start);
  };
  std::vector<double> ratios;
  for (int64_t r = 0; r < c.repeats; ++r) {
    const double one = rate(1);
    ratios.push_back(rate(c.threads) / one);
  }
  std::sort(ratios.begin(), ratios.end());
  return ratios[ratios.size() / 2];
}

BenchResult run_bench(const BenchConfig& c, double peak_gflops) {
  validate(c);
  start_threads(c.threads);

  // The fixed batch, a pure function of (B, T, vocab, classes) that bench/train_step_torch.py builds too:
  // row b has length T/4 + (31·b mod (T - T/4 + 1)) (row 0 has T), token t of row b is
  // 3 + ((17·b + 5·t) mod (vocab - 3)), pads are id 0 and masked, target b is (7·b) mod classes.
  const int64_t B = c.batch, T = c.seq, min_len = T / 4;
  std::vector<int64_t> token_ids(B * T), targets(B);
  std::vector<int> pads(B * T);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = b == 0 ? T : min_len + (31 * b) % (T - min_len + 1);
    for (int64_t t = 0; t < T; ++t) {
      pads[b * T + t] = t >= len;
      token_ids[b * T + t] = t >= len ? 0 : 3 + (17 * b + 5 * t) % (c.vocab - 3);
    }
    targets[b] = (7 * b) % c.classes;
  }
  const Tensor id_tensor = ids(token_ids, {B, T}), padding = mask(pads, {B, T}), target_tensor = ids(targets, {B});

  // The default model of `tapegrad train` at this size (post-LN, relu, learned positions, mean pooling,
  // no dropout) and its optimizer (AdamW, lr 5e-3, weight decay 0.01).
  Generator init(0);
  nn::SequenceClassifier model(bench_model(c), init, nullptr);
  model.train();
  optim::AdamW optimizer(model.named_parameters(), {.lr = 5e-3, .weight_decay = 0.01});

  double loss_value = 0;
  auto step = [&] {
    const Tensor logits = model.forward(id_tensor, padding);
    const Tensor loss = cross_entropy(logits, target_tensor);
    {
      ProfileScope phase("zero_grad");
      optimizer.zero_grad();
    }
    backward(loss);
    {
      ProfileScope phase("optimizer step (AdamW)");
      optimizer.step();
    }
    loss_value = loss.item();
  };
  for (int64_t i = 0; i < c.warmup; ++i) step();

  // The median chunk's rate: the machine may be shared, and the median ignores a chunk a neighbour slowed.
  const int64_t chunk = std::max<int64_t>(1, c.steps / c.repeats);
  std::vector<double> rates;
  rates.reserve(c.repeats);  // the bench's own bookkeeping allocates nothing while it counts
  const uint64_t heap_before = heap_allocations(), maps_before = storage_mappings();
  for (int64_t r = 0; r < c.repeats; ++r) {
    const auto start = Clock::now();
    for (int64_t i = 0; i < chunk; ++i) step();
    rates.push_back(static_cast<double>(chunk) / seconds_since(start));
  }
  const double timed_steps = static_cast<double>(chunk * c.repeats);
  const uint64_t heap_after = heap_allocations(), maps_after = storage_mappings();
  std::sort(rates.begin(), rates.end());

  BenchResult r;
  if (c.scaling) r.thread_scaling = thread_scaling(step, chunk, c);
  if (c.profile) {  // after the counted steps: the profile's table allocates
    r.profiled_steps = c.steps;
    start_profile();
    const auto start = Clock::now();
    for (int64_t i = 0; i < c.steps; ++i) step();
    r.profiled_seconds = seconds_since(start);
    r.profile = stop_profile();
  }
  r.config = c;
  r.parameters = model.parameter_count();
  r.steps_per_second = rates[rates.size() / 2];
  r.tokens_per_second = r.steps_per_second * static_cast<double>(B * T);
  r.gflops = r.steps_per_second * step_flops(c) / 1e9;
  r.peak_gflops = peak_gflops;
  r.utilisation = peak_gflops > 0 ? r.gflops / peak_gflops : 0;
  r.peak_rss_mib = peak_rss_mib();
  r.final_loss = loss_value;
  if (tapegrad_heap_allocations) r.heap_allocations_per_step = static_cast<double>(heap_after - heap_before) / timed_steps;
  r.storage_mappings_per_step = static_cast<double>(maps_after - maps_before) / timed_steps;
  r.threads = num_threads();
  const BlasInfo blas = blas_info();
  r.blas = blas.library;
  r.kernels = blas.kernels + " (" + blas.how_chosen + ")";
  r.blas_advice = blas.advice;
  r.cpu = cpu_info();
  return r;
}

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
          {"gflop_per_step", step_flops(c) / 1e9},
          {"gflops", r.gflops},
          {"peak_gflops", r.peak_gflops},
          {"model_flop_utilisation", r.utilisation},
          {"threads", r.threads},
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
  std::snprintf(text, sizeof text,
                "%s: d_model %lld, %lld heads, d_ff %lld, %lld layers, T %lld, batch %lld (%lld parameters)\n"
                "  %.2f steps/s, %.0f tokens/s, %.1f GFLOP/s of %.1f GFLOP per step: %.1f%% of the FMA peak (%.0f GFLOP/s)\n"
                "  CPU: %s, %d-bit vectors (%s)\n"
                "  %d thread%s; BLAS: %s, kernels %s\n"
                "  peak RSS %.1f MiB; per step: %s heap allocations, %.2f new buffer mappings\n",
                c.name.c_str(), static_cast<long long>(c.d_model), static_cast<long long>(c.heads),
                static_cast<long long>(c.d_ff), static_cast<long long>(c.layers), static_cast<long long>(c.seq),
                static_cast<long long>(c.batch), static_cast<long long>(r.parameters), r.steps_per_second,
                r.tokens_per_second, r.gflops, step_flops(c) / 1e9, 100 * r.utilisation, r.peak_gflops,
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
