#include "train/training_memory.h"

#include <unistd.h>

#include <cstdio>

#include "autograd/error.h"

namespace tapegrad {

// Float32 weights, gradients and two Adam moments (16 bytes a parameter), and what a step keeps for
// backward: per layer about 16 floats per position and model dimension (attention's inputs and outputs,
// layer norms, residuals), 3 per position and feed-forward dimension, and the (B, H, T, T) attention
// weights twice. It errs high: 641 MiB for the medium model of docs/performance.md, whose training peaks
// at 314 MiB. It is only meant to refuse, before allocating any of it, what cannot fit.
double training_memory_bytes(const TrainOptions& o) {
  const nn::ClassifierOptions& m = o.model;
  const double B = o.batch_size, T = m.context_length, C = m.d_model, F = m.d_ff, H = m.n_heads;
  const double per_layer = B * T * (16 * C + 3 * F) + 2 * B * H * T * T;
  return 16 * static_cast<double>(nn::parameter_count(m)) + 4 * (m.n_layers * per_layer + 4 * B * T * C);
}

void check_memory(const TrainOptions& o) {
  const double needed = training_memory_bytes(o);
  const double machine = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (machine > 0 && needed > machine) {
    constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
    char line[320];
    std::snprintf(line, sizeof line,
                  "this model needs about %.1f GiB to train (%.3g parameters, batch %lld x context %lld), more than "
                  "this machine's %.1f GiB of memory; lower --batch-size, --context-length, --d-model, --ff or --layers",
                  needed / GiB, static_cast<double>(nn::parameter_count(o.model)), static_cast<long long>(o.batch_size),
                  static_cast<long long>(o.model.context_length), machine / GiB);
    throw ValueError(line);
  }
}

}  // namespace tapegrad
