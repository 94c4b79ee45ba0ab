#pragma once
// Strided iteration shared by the elementwise kernels: walk N operands over one index space, one
// innermost row at a time, merging dims wherever every operand's layout allows (so contiguous
// tensors become a single row and the inner loop is a plain vectorisable loop).
#include <array>
#include <cstdint>

#include "autograd/parallel.h"
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

namespace detail {

/// An index space whose dims were merged wherever every operand's layout allows: dims.back() is the row.
template <size_t N>
struct RowSpace {
  Shape dims;
  std::array<Shape, N> strides;
  int64_t rows() const { return dims.rank() == 0 ? 1 : dims.numel() / dims.back(); }
  int64_t row_length() const { return dims.rank() == 0 ? 1 : dims.back(); }
  std::array<int64_t, N> steps() const {
    std::array<int64_t, N> steps{};
    if (dims.rank() > 0)
      for (size_t k = 0; k < N; ++k) steps[k] = strides[k].back();
    return steps;
  }
};

template <size_t N>
RowSpace<N> merge_dims(const Shape& shape, const std::array<Shape, N>& strides) {
  RowSpace<N> space;
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] == 1) continue;
    bool mergeable = space.dims.rank() > 0;
    for (size_t k = 0; k < N && mergeable; ++k) mergeable = space.strides[k].back() == strides[k][i] * shape[i];
    if (mergeable) {
      space.dims[space.dims.rank() - 1] *= shape[i];
      for (size_t k = 0; k < N; ++k) space.strides[k][space.strides[k].rank() - 1] = strides[k][i];
      continue;
    }
    space.dims.push_back(shape[i]);
    for (size_t k = 0; k < N; ++k) space.strides[k].push_back(strides[k][i]);
  }
  return space;
}

/// body(offsets, n, steps) for rows [first, last) of the space.
template <size_t N, class Body>
void walk_rows(const RowSpace<N>& space, int64_t first, int64_t last, Body& body) {
  std::array<int64_t, N> offsets{};
  const std::array<int64_t, N> steps = space.steps();
  const int outer = space.dims.rank() - 1;  // dims before the row
  if (outer < 0) {
    body(offsets, int64_t{1}, steps);
    return;
  }
  int64_t counter[kMaxRank] = {};
  for (int64_t d = outer - 1, r = first; d >= 0; --d) {  // row `first`'s position over the outer dims
    counter[d] = r % space.dims[d];
    r /= space.dims[d];
    for (size_t k = 0; k < N; ++k) offsets[k] += counter[d] * space.strides[k][d];
  }
  const int64_t n = space.dims.back();
  for (int64_t row = first; row < last; ++row) {
    body(offsets, n, steps);
    for (int d = outer - 1; d >= 0; --d) {  // odometer increment over the outer dims
      for (size_t k = 0; k < N; ++k) offsets[k] += space.strides[k][d];
      if (++counter[d] < space.dims[d]) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= space.strides[k][d] * space.dims[d];
      counter[d] = 0;
    }
  }
}

}  // namespace detail

/// Calls body(offsets, n, steps) once per innermost row of `shape`: operand k's elements in that row sit
/// at offsets[k] + i * steps[k] for i in [0, n). Offsets are in elements, relative to each operand's start.
template <size_t N, class Body>
void for_each_row(const Shape& shape, const std::array<Shape, N>& strides, Body&& body) {
  if (shape.numel() == 0) return;
  const detail::RowSpace<N> space = detail::merge_dims(shape, strides);
  detail::walk_rows(space, 0, space.rows(), body);
}

/// for_each_row split across tapegrad's threads when the space is large enough to share (parallel.h's
/// grain_for_elements): whole rows to each thread, or parts of one long row. Only for bodies whose calls
/// write disjoint elements (a map's fresh output, a gradient every element of which gets one
/// contribution) and read nothing another call writes; each element is then computed as serially.
template <size_t N, class Body>
void parallel_for_each_row(const Shape& shape, const std::array<Shape, N>& strides, Body&& body) {
  if (shape.numel() == 0) return;
  const detail::RowSpace<N> space = detail::merge_dims(shape, strides);
  const int64_t rows = space.rows(), n = space.row_length();
  if (rows == 1) {  // one long row (a contiguous tensor): parts of it
    const std::array<int64_t, N> steps = space.steps();
    parallel_for(n, grain_for_elements(1), [&](int64_t begin, int64_t end) {
      std::array<int64_t, N> offsets{};
      for (size_t k = 0; k < N; ++k) offsets[k] = begin * steps[k];
      body(offsets, end - begin, steps);
    });
    return;
  }
  parallel_for(rows, grain_for_elements(n), [&](int64_t first, int64_t last) { detail::walk_rows(space, first, last, body); });
}

}  // namespace tapegrad
