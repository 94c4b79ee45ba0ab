#pragma once
// The machine `tapegrad bench` measures against: its CPU, the FMA peak of its cores, and the thread pool
// started for a run.
#include <string>

namespace tapegrad {

/// The CPU the bench runs on: its model name (/proc/cpuinfo) and the widest float vectors tapegrad's
/// kernels and the FMA peak use on it.
struct CpuInfo {
  std::string model;
  int vector_bits = 128;        // 512 with AVX-512F, 256 with AVX2 and FMA, else 128 (SSE2)
  std::string instruction_set;  // "AVX-512", "AVX2+FMA" or "SSE2 (no FMA)"
};
CpuInfo cpu_info();

/// The FMA peak of `threads` cores in GFLOP/s, measured now: independent chains of fused multiply-adds at
/// the widest vector width the CPU has (cpu_info; separate multiplies and adds without FMA), on every
/// thread at once.
double measure_fma_peak_gflops(int threads);

/// set_num_threads, with a pool the machine cannot start (a process limit: "Resource temporarily
/// unavailable") refused as a ValueError naming --threads.
void start_threads(int threads);

}  // namespace tapegrad
