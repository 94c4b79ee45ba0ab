#pragma once
// Fixtures shared by the nn tests: deterministic fills that match the PyTorch oracle scripts quoted in
// test_attention.cpp and input edits for the causality and padding tests. (The registered layer
// gradchecks run once each, in tests/nn/test_module.cpp.)
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/module.h"

namespace tapegrad::testing {

using nn::Module;

/// Converts m to float64 and sets element j of its p-th named parameter to 0.5 sin(0.7 j + 1.3 p + 0.1),
/// the fill of the PyTorch oracle script quoted in test_attention.cpp.
inline void fill_deterministic(Module& m) {
  m.to(DType::float64);
  NoGradGuard no_grad;
  int p = 0;
  for (auto& [name, t] : m.named_parameters()) {
    std::vector<double> values(t.numel());
    for (size_t j = 0; j < values.size(); ++j) values[j] = 0.5 * std::sin(0.7 * j + 1.3 * p + 0.1);
    t.copy_(tensor(values, t.shape(), DType::float64));
    ++p;
  }
}

/// float64 input whose element j is sin(0.37 j + phase), as the oracle script's inputs().
inline Tensor sine_input(const Shape& shape, double phase = 0.5) {
  std::vector<double> values(shape.numel());
  for (size_t j = 0; j < values.size(); ++j) values[j] = std::sin(0.37 * j + phase);
  return tensor(values, shape, DType::float64);
}

/// x with positions [from, to) of batch row b replaced by fresh normal values.   x: (B, T, C) -> same
inline Tensor replace_positions(const Tensor& x, int64_t b, int64_t from, int64_t to, Generator& gen) {
  std::vector<double> values = x.to_vector();
  const int64_t T = x.size(1), C = x.size(2);
  for (int64_t t = from; t < to; ++t)
    for (int64_t c = 0; c < C; ++c) values[(b * T + t) * C + c] = gen.normal();
  return tensor(values, x.shape(), x.dtype());
}

}  // namespace tapegrad::testing
