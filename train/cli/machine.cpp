// The CPU, its FMA peak and the thread pool of a bench run (machine.h).
#include "train/cli/machine.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <system_error>

#include "autograd/error.h"
#include "autograd/parallel.h"

namespace tapegrad {

namespace {

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

}  // namespace

void start_threads(int threads) {
  try {
    set_num_threads(threads);
  } catch (const std::system_error& e) {
    throw ValueError(cat("--threads ", threads, ": this machine cannot start that many threads (", e.what(),
                         "); ask for fewer"));
  }
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
    const auto start = std::chrono::steady_clock::now();  // parts run at once: one wall time for all
    parallel_for(parts, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) sink = sink + chains(iterations);
    });
    best = std::max(best, flops_per_iteration * static_cast<double>(iterations) * parts / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 1e9);
  }
  return best;
}

}  // namespace tapegrad
