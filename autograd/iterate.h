#pragma once
// Strided iteration shared by the elementwise kernels: walk N operands over one index space, one
// innermost row at a time, merging dims wherever every operand's layout allows (so contiguous
// tensors become a single row and the inner loop is a plain vectorisable loop).
#include <array>
#include <cstdint>

#include "autograd/shape.h"
#include "autograd/tensor.h"

namespace tapegrad {

/// Strides that read `t` as if broadcast to `out` (stride 0 along broadcast dims).
inline Shape broadcast_strides(const Tensor& t, const Shape& out) {
  Shape strides;
  const Shape& shape = t.shape();
  int shift = out.rank() - shape.rank();
  for (int i = 0; i < out.rank(); ++i) {
    int j = i - shift;
    strides.push_back(j < 0 || shape[j] == 1 ? 0 : t.strides()[j]);
  }
  return strides;
}

/// Calls body(offsets, n, steps) once per innermost row of `shape`: operand k's elements in that row sit
/// at offsets[k] + i * steps[k] for i in [0, n). Offsets are in elements, relative to each operand's start.
template <size_t N, class Body>
void for_each_row(const Shape& shape, const std::array<Shape, N>& strides, Body&& body) {
  if (shape.numel() == 0) return;
  Shape dims;
  std::array<Shape, N> merged;
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] == 1) continue;
    bool mergeable = dims.rank() > 0;
    for (size_t k = 0; k < N && mergeable; ++k) mergeable = merged[k].back() == strides[k][i] * shape[i];
    if (mergeable) {
      dims[dims.rank() - 1] *= shape[i];
      for (size_t k = 0; k < N; ++k) merged[k][merged[k].rank() - 1] = strides[k][i];
      continue;
    }
    dims.push_back(shape[i]);
    for (size_t k = 0; k < N; ++k) merged[k].push_back(strides[k][i]);
  }
  std::array<int64_t, N> offsets{}, steps{};
  if (dims.rank() == 0) {
    body(offsets, int64_t{1}, steps);
    return;
  }
  const int last = dims.rank() - 1;
  for (size_t k = 0; k < N; ++k) steps[k] = merged[k][last];
  const int64_t n = dims[last], rows = shape.numel() / n;
  int64_t counter[kMaxRank] = {};
  for (int64_t row = 0; row < rows; ++row) {
    body(offsets, n, steps);
    for (int d = last - 1; d >= 0; --d) {  // odometer increment over the outer dims
      for (size_t k = 0; k < N; ++k) offsets[k] += merged[k][d];
      if (++counter[d] < dims[d]) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= merged[k][d] * dims[d];
      counter[d] = 0;
    }
  }
}

}  // namespace tapegrad
