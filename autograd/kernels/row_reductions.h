#pragma once
// Reductions of one row of n elements spaced `stride` apart (std::integral_constant<int64_t, 1> for a
// contiguous row, so that the loops compile to plain vector loops), in double for float rows too.
//
// fast     : four interleaved chains (s0 gets elements 0, 4, 8, ..., s1 gets 1, 5, 9, ...), combined as
//            (s0 + s1) + (s2 + s3). Independent chains keep the adder busy, and the compiler vectorises
//            them; one running sum is a chain of latencies.
// reference: one running sum (or max) from the first element, the loop a reader would write.
// The two differ only in the order of the additions: by a few units of double rounding, so not at all
// once a float row's result is rounded to float, in all but rare ties. A max has no rounding: the fast
// one is the reference's value (tests/autograd/test_kernels.cpp pins both).
#include <cstdint>
#include <type_traits>

namespace tapegrad {

/// The stride of a contiguous row, known at compile time.
using Contiguous = std::integral_constant<int64_t, 1>;
inline constexpr Contiguous kContiguous{};

/// Whether any of the contiguous x[0 .. n) is not zero (a NaN is not), read up to the first that is not:
/// about one element for a dense row. Backward kernels skip the rows of a gradient where it is false.
template <class T>
bool row_has_nonzero(const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (x[i] != T(0)) return true;
  return false;
}

/// max_i x[i·stride] (n >= 1) with the semantics of the running `m = x_i > m ? x_i : m` from m = x[0]:
/// NaN when x[0] is NaN, other NaNs skipped. Only a tie of +0 and -0 may give the other zero, which
/// changes no x - m.
template <class T, class Stride>
T row_max(const T* x, int64_t n, Stride stride) {
  T m0 = x[0], m1 = x[0], m2 = x[0], m3 = x[0];
  int64_t i = 1;
  for (; i + 4 <= n; i += 4) {
    m0 = x[i * stride] > m0 ? x[i * stride] : m0;
    m1 = x[(i + 1) * stride] > m1 ? x[(i + 1) * stride] : m1;
    m2 = x[(i + 2) * stride] > m2 ? x[(i + 2) * stride] : m2;
    m3 = x[(i + 3) * stride] > m3 ? x[(i + 3) * stride] : m3;
  }
  for (; i < n; ++i) m0 = x[i * stride] > m0 ? x[i * stride] : m0;
  m0 = m1 > m0 ? m1 : m0;
  m0 = m2 > m0 ? m2 : m0;
  return m3 > m0 ? m3 : m0;
}

template <class T>
T row_max_reference(const T* x, int64_t n) {
  T m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

/// sum_i x[i·stride]
template <class T, class Stride>
double row_sum(const T* x, int64_t n, Stride stride) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += x[i * stride];
    s1 += x[(i + 1) * stride];
    s2 += x[(i + 2) * stride];
    s3 += x[(i + 3) * stride];
  }
  for (; i < n; ++i) s0 += x[i * stride];
  return (s0 + s1) + (s2 + s3);
}

template <class T>
double row_sum_reference(const T* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

/// sum_i a[i·stride] · b[i·stride]
template <class T, class U, class Stride>
double row_dot(const T* a, const U* b, int64_t n, Stride stride) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += static_cast<double>(a[i * stride]) * b[i * stride];
    s1 += static_cast<double>(a[(i + 1) * stride]) * b[(i + 1) * stride];
    s2 += static_cast<double>(a[(i + 2) * stride]) * b[(i + 2) * stride];
    s3 += static_cast<double>(a[(i + 3) * stride]) * b[(i + 3) * stride];
  }
  for (; i < n; ++i) s0 += static_cast<double>(a[i * stride]) * b[i * stride];
  return (s0 + s1) + (s2 + s3);
}

template <class T, class U>
double row_dot_reference(const T* a, const U* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

/// sum_i (x_i - μ)² of a contiguous row (the two-pass variance's second pass)
template <class T>
double row_centred_squares(const T* x, double mu, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += (x[i] - mu) * (x[i] - mu);
    s1 += (x[i + 1] - mu) * (x[i + 1] - mu);
    s2 += (x[i + 2] - mu) * (x[i + 2] - mu);
    s3 += (x[i + 3] - mu) * (x[i + 3] - mu);
  }
  for (; i < n; ++i) s0 += (x[i] - mu) * (x[i] - mu);
  return (s0 + s1) + (s2 + s3);
}

template <class T>
double row_centred_squares_reference(const T* x, double mu, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += (x[i] - mu) * (x[i] - mu);
  return s;
}

}  // namespace tapegrad
