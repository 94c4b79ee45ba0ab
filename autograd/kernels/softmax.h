#pragma once
// Row kernels of softmax and log_softmax, forward and backward, each beside a plain reference. A row is n
// elements spaced `stride` apart (kContiguous for the last dim). Used by autograd/ops/softmax.cpp and the
// fused attention. The math is derived in ops/softmax.cpp; here is what each fast kernel does that its
// reference (one running max, one running sum, std::exp: the loops a reader would write) does not:
//   - softmax_row: the row max (in T) and the sum of the exps (in double) as four interleaved chains
//     (row_reductions.h); exp of a contiguous float row four lanes at a time with the bits of glibc's expf
//     (exp.h), std::exp otherwise; the division by the sum replaced by a multiplication by its reciprocal.
//   - softmax_row_backward: <dy, y> as four interleaved chains in double.
//   - log_softmax_row: only the row max as four chains (the same value as the reference's). The sum of
//     exp(x - m) is one running sum of std::exp in double, as in the reference; log s is rounded to T once,
//     before the subtraction, where the reference subtracts in double.
//   - log_softmax_row_backward: the fully-masked test (the max of y) and sum(dy) (in double) as four chains.
// So fast and reference differ by the order of additions in double and one rounding of 1/s or of log s: at
// most a few float ulps (tests/autograd/test_kernels.cpp states and checks the bounds).
//
// A row that is entirely -inf (every key masked) has no defined softmax: softmax gives zeros, log_softmax
// -inf, both with a zero gradient, instead of the NaN that exp(-inf - -inf) would give.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "autograd/kernels/exp.h"
#include "autograd/kernels/row_reductions.h"

namespace tapegrad {

namespace detail {
template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();
}

/// y = softmax(x) of one row; y must not overlap x.
template <class T, class Stride>
void softmax_row(const T* x, T* y, int64_t n, Stride stride) {
  if (n == 0) return;
  const T m = row_max(x, n, stride);
  if (m == detail::kNegInf<T>) {  // fully masked row
    for (int64_t i = 0; i < n; ++i) y[i * stride] = T(0);
    return;
  }
  // The exps first and their sum after: a running sum would live across the exp calls, which clobber
  // every vector register, and turn the loop into a chain through memory.
  if constexpr (std::is_same_v<T, float> && std::is_same_v<Stride, Contiguous>)
    exp_shifted(x, m, y, n);
  else
    for (int64_t i = 0; i < n; ++i) y[i * stride] = std::exp(x[i * stride] - m);
  const T inv = static_cast<T>(1.0 / row_sum(y, n, stride));  // the sum is in [1, n]: one term is exp(0)
  for (int64_t i = 0; i < n; ++i) y[i * stride] *= inv;
}

template <class T>
void softmax_row_reference(const T* x, T* y, int64_t n) {
  if (n == 0) return;
  const T m = row_max_reference(x, n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(x[i] - m);
  for (int64_t i = 0; i < n; ++i) y[i] = m == detail::kNegInf<T> ? T(0) : static_cast<T>(std::exp(x[i] - m) / s);
}

/// y = log_softmax(x) of one row: y_i = (x_i - m) - log sum_j exp(x_j - m); y may not overlap x.
template <class T, class Stride>
void log_softmax_row(const T* x, T* y, int64_t n, Stride stride) {
  if (n == 0) return;
  const T m = row_max(x, n, stride);
  if (m == detail::kNegInf<T>) {  // fully masked row: log 0
    for (int64_t i = 0; i < n; ++i) y[i * stride] = detail::kNegInf<T>;
    return;
  }
  double s = 0;  // every term is in (0, 1] and one is exactly 1, so s is in [1, n]: no overflow
  for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i * stride] - m));
  const T log_s = static_cast<T>(std::log(s));  // (x - m) first: exact near the max, even for huge m
  for (int64_t i = 0; i < n; ++i) y[i * stride] = (x[i * stride] - m) - log_s;
}

template <class T>
void log_softmax_row_reference(const T* x, T* y, int64_t n) {
  if (n == 0) return;
  const T m = row_max_reference(x, n);
  if (m == detail::kNegInf<T>) {
    for (int64_t i = 0; i < n; ++i) y[i] = detail::kNegInf<T>;
    return;
  }
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i] - m));
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>((x[i] - m) - std::log(s));
}

/// dx += y ⊙ (dy - <dy, y>) on one row (dx a GradPtr; it may point at dy's memory when it assigns).
template <class T, class Dx, class Stride>
void softmax_row_backward(const T* y, const T* dy, Dx dx, int64_t n, Stride stride) {
  const T c = static_cast<T>(row_dot(dy, y, n, stride));
  for (int64_t i = 0; i < n; ++i) dx[i * stride] += y[i * stride] * (dy[i * stride] - c);
}

template <class T>
void softmax_row_backward_reference(const T* y, const T* dy, T* dx, int64_t n) {
  const T c = static_cast<T>(row_dot_reference(dy, y, n));
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] * (dy[i] - c);
}

/// dx += dy - exp(y) · sum(dy) on one row of log_softmax's output y; a fully masked row (all y = -inf)
/// gets zero.
template <class T, class Dx, class Stride>
void log_softmax_row_backward(const T* y, const T* dy, Dx dx, int64_t n, Stride stride) {
  if (n > 0 && row_max(y, n, stride) == detail::kNegInf<T>) {  // fully masked row
    for (int64_t i = 0; i < n; ++i) dx[i * stride] += T(0);
    return;
  }
  const T c = static_cast<T>(row_sum(dy, n, stride));
  for (int64_t i = 0; i < n; ++i) dx[i * stride] += dy[i * stride] - std::exp(y[i * stride]) * c;
}

template <class T>
void log_softmax_row_backward_reference(const T* y, const T* dy, T* dx, int64_t n) {
  bool masked = true;
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    masked = masked && y[i] == detail::kNegInf<T>;
    total += dy[i];
  }
  for (int64_t i = 0; i < n; ++i) dx[i] = masked ? T(0) : dy[i] - std::exp(y[i]) * static_cast<T>(total);
}

}  // namespace tapegrad
