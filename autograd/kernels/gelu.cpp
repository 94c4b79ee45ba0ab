// gelu_forward / gelu_backward: Φ from Numerical Recipes' erfcc (Press et al., 2nd ed., §6.2), a Chebyshev
// fit of erfc with relative error below 1.2e-7 for every z >= 0:
//   t = 1 / (1 + z/2),   erfc(z) = t · exp(-z² + P(t)),
//   P(t) = -1.26551223 + t(1.00002368 + t(0.37409196 + ... + t·0.17087277)),   degree 9.
// With z = |x|/√2 and h = ½ erfc(z):
//   Φ(x) = ½ erfc(-x/√2) = h          for x < 0   (relatively accurate far into the tail, unlike ½(1 + erf),
//                                                   which loses every digit to cancellation by x = -6)
//                        = 1 - h      for x >= 0  (erfc(-z) = 2 - erfc(z); h <= ½, so no cancellation)
//   φ(x) = e^{-x²/2} / √(2π)
// The exponent -x²/2 + P(t) is formed with one fused multiply-add from x itself (not from the rounded z),
// so its only rounding is the final one, half an ulp of about x²/2. That rounding, and exp's 2 ulp, set
// the error. Measured against the double references over x in [-10, 10] in steps of 5e-5: y within
// 3.9e-7 (1 + x²) relative, dx within 3.4e-7 (1 + x²) of |dy| (Φ + |x| φ). The factor 1 + x² is Φ's own
// sensitivity in the negative tail (x Φ'/Φ ≈ x²: rounding x itself moves Φ by as much); the float
// ½x(1 + erf(x/√2)) this replaces is within 4.8e-7 absolute but loses all relative accuracy there.
// tests/autograd/test_kernels.cpp holds both kernels to 5e-7 (1 + x²).
//
// Work goes in chunks of kChunk elements through stack buffers (no allocation per call): one loop forms
// the exponents, exp_shifted_fast takes the exponentials of the chunk in place, one loop finishes.
// Special values: ±inf give erfc = 0 (t = 0, exp(-inf) = 0), so y(+inf) = +inf and y(-inf) = -inf · 0 =
// NaN, as x · ½(1 + erf(x/√2)) gives; NaN stays NaN.
#include "autograd/kernels/gelu.h"

#include <bit>
#include <cmath>
#include <cstdint>

#include "autograd/kernels/exp.h"

namespace tapegrad {

namespace {

constexpr int64_t kChunk = 256;
constexpr float kInvSqrt2 = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;
constexpr double kInvSqrt2D = 0.70710678118654752, kInvSqrt2PiD = 0.39894228040143268;

/// P(t) of erfcc, Horner from the highest coefficient.
inline float erfcc_poly(float t) {
  float p = 0.17087277f;
  p = std::fma(p, t, -0.82215223f);
  p = std::fma(p, t, 1.48851587f);
  p = std::fma(p, t, -1.13520398f);
  p = std::fma(p, t, 0.27886807f);
  p = std::fma(p, t, -0.18628806f);
  p = std::fma(p, t, 0.09678418f);
  p = std::fma(p, t, 0.37409196f);
  p = std::fma(p, t, 1.00002368f);
  return std::fma(p, t, -1.26551223f);
}

/// t[i] = 1 / (1 + |x_i|/(2√2)) and e[i] = -x_i²/2 + P(t[i]), the exponent of erfc(|x_i|/√2) / t[i].
inline void erfc_parts(const float* x, float* t, float* e, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float ti = 1.0f / std::fma(0.5f * kInvSqrt2, std::fabs(x[i]), 1.0f);
    t[i] = ti;
    e[i] = std::fma(-0.5f * x[i], x[i], erfcc_poly(ti));
  }
}

/// Φ(x) from h = ½ erfc(|x|/√2): 1 - h where x's sign bit is clear, h where it is set (-0 gives ½ either
/// way). Written as fma(±1, h, 1 or 0) with the sign read from the bits, so that only constants are
/// selected: under GCC's default -ftrapping-math a float compare (it may raise on NaN) or a choice between
/// two computed values keeps the loop from being vectorised.
inline float cdf_from_half_erfc(float x, float h) {
  const bool upper = std::bit_cast<int32_t>(x) >= 0;
  return std::fma(upper ? -1.0f : 1.0f, h, upper ? 1.0f : 0.0f);
}

}  // namespace

void gelu_forward(const float* x, float* y, int64_t n) {
  alignas(64) float t[kChunk], e[kChunk];
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t m = n - start < kChunk ? n - start : kChunk;
    const float* xc = x + start;
    erfc_parts(xc, t, e, m);
    exp_shifted_fast(e, 0.0f, e, m);
    float* yc = y + start;
    for (int64_t i = 0; i < m; ++i) {
      yc[i] = xc[i] * cdf_from_half_erfc(xc[i], 0.5f * t[i] * e[i]);
    }
  }
}

template <GradMode kMode>
void gelu_backward(const float* dy, const float* x, GradPtr<float, kMode> dx, int64_t n) {
  alignas(64) float t[kChunk], e[kChunk], g[kChunk];
  float* d = dx.data();
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t m = n - start < kChunk ? n - start : kChunk;
    const float* xc = x + start;
    erfc_parts(xc, t, e, m);
    for (int64_t i = 0; i < m; ++i) g[i] = -0.5f * xc[i] * xc[i];  // exponent of φ·√(2π)
    exp_shifted_fast(e, 0.0f, e, m);
    exp_shifted_fast(g, 0.0f, g, m);
    const float* dyc = dy + start;
    float* dc = d + start;
    for (int64_t i = 0; i < m; ++i) {
      const float cdf = cdf_from_half_erfc(xc[i], 0.5f * t[i] * e[i]);
      const float v = dyc[i] * std::fma(xc[i], kInvSqrt2Pi * g[i], cdf);  // dy (Φ + x φ)
      if constexpr (kMode == GradMode::assign) dc[i] = v;
      else dc[i] += v;
    }
  }
}

template void gelu_backward<GradMode::add>(const float*, const float*, GradPtr<float, GradMode::add>, int64_t);
template void gelu_backward<GradMode::assign>(const float*, const float*, GradPtr<float, GradMode::assign>,
                                              int64_t);

void gelu_forward_reference(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = static_cast<float>(v * 0.5 * std::erfc(-v * kInvSqrt2D));
  }
}

template <GradMode kMode>
void gelu_backward_reference(const float* dy, const float* x, GradPtr<float, kMode> dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double slope = 0.5 * std::erfc(-v * kInvSqrt2D) + v * kInvSqrt2PiD * std::exp(-0.5 * v * v);
    dx[i] += static_cast<float>(dy[i] * slope);
  }
}

template void gelu_backward_reference<GradMode::add>(const float*, const float*, GradPtr<float, GradMode::add>,
                                                      int64_t);
template void gelu_backward_reference<GradMode::assign>(const float*, const float*,
                                                         GradPtr<float, GradMode::assign>, int64_t);

}  // namespace tapegrad
