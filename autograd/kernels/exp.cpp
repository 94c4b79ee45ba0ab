// exp_shifted: glibc's expf, four lanes at a time.
//
// glibc's expf (sysdeps/ieee754/flt-32/e_expf.c, built with FMA on x86-64 CPUs that have it and chosen
// at load time) works in double: with k = round(x · 32/ln2) and r = x · 32/ln2 - k (|r| <= 1/2),
//   exp(x) = 2^(k/32) · 2^(r/32),   2^(k/32) = s, the table entry k mod 32 with k div 32 added to its
//                                    exponent bits,
//   2^(r/32) ≈ C0 r³ + C1 r² + C2 r + 1,
// rounded to float once at the end. exp_shifted performs the same operations in the same order (the same
// fused multiply-adds, the same table and constants) on four lanes of double, so it returns the same
// bits; tests/autograd/test_kernels.cpp holds it to std::exp over every float input on a stride through
// the bit patterns and at the special values. Lanes that expf treats specially (|x - m| >= 88, NaN, +inf)
// are recomputed with std::exp; -inf, a masked score, gives 0 as expf does.
#include "autograd/kernels/exp.h"
#include "autograd/kernels/exp_lanes.h"

#if defined(__AVX2__) && defined(__FMA__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>

#include <cmath>
#include <limits>

namespace tapegrad {

void exp_shifted_reference(const float* x, float m, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i] - m);
}

void exp_shifted(const float* x, float m, float* y, int64_t n) {
#if defined(__AVX2__) && defined(__FMA__)
  alignas(32) static constexpr uint64_t kTable[32] = {
      0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
      0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
      0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
      0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
      0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
      0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
      0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
      0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
  };
  const __m256d inv_ln2_n = _mm256_set1_pd(0x1.71547652b82fep+5), shift = _mm256_set1_pd(0x1.8p+52);
  const __m256d c0 = _mm256_set1_pd(0x1.c6af84b912394p-20), c1 = _mm256_set1_pd(0x1.ebfce50fac4f3p-13),
                c2 = _mm256_set1_pd(0x1.62e42ff0c52d6p-6), one = _mm256_set1_pd(1.0);
  const __m128 mv = _mm_set1_ps(m), neg_inf = _mm_set1_ps(-std::numeric_limits<float>::infinity());
  const __m128i top_mask = _mm_set1_epi32(0x7ff), top_limit = _mm_set1_epi32(0x42a);
  const __m256i index_mask = _mm256_set1_epi64x(31);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 xf = _mm_sub_ps(_mm_loadu_ps(x + i), mv);
    const __m128 is_neg_inf = _mm_cmpeq_ps(xf, neg_inf);
    const __m128i abstop = _mm_and_si128(_mm_srli_epi32(_mm_castps_si128(xf), 20), top_mask);
    const __m128 special = _mm_andnot_ps(is_neg_inf, _mm_castsi128_ps(_mm_cmpgt_epi32(abstop, top_limit)));
    const __m256d xd = _mm256_cvtps_pd(xf);
    __m256d kd = _mm256_fmadd_pd(inv_ln2_n, xd, shift);  // adding 1.5·2^52 rounds to an integer: k
    const __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, shift);
    const __m256d r = _mm256_fmsub_pd(inv_ln2_n, xd, kd);
    const __m256i t = _mm256_add_epi64(
        _mm256_i64gather_epi64(reinterpret_cast<const long long*>(kTable), _mm256_and_si256(ki, index_mask), 8),
        _mm256_slli_epi64(ki, 47));
    const __m256d z = _mm256_fmadd_pd(c0, r, c1), r2 = _mm256_mul_pd(r, r);
    __m256d yd = _mm256_fmadd_pd(c2, r, one);
    yd = _mm256_fmadd_pd(z, r2, yd);
    yd = _mm256_mul_pd(yd, _mm256_castsi256_pd(t));
    _mm_storeu_ps(y + i, _mm_andnot_ps(is_neg_inf, _mm256_cvtpd_ps(yd)));
    if (const int lanes = _mm_movemask_ps(special))
      for (int j = 0; j < 4; ++j)
        if (lanes & (1 << j)) y[i + j] = std::exp(x[i + j] - m);
  }
  for (; i < n; ++i) y[i] = std::exp(x[i] - m);
#else
  exp_shifted_reference(x, m, y, n);
#endif
}

// exp_shifted_fast: Cephes's expf in float lanes. With n = round(x / ln 2) and r = x - n ln 2 (ln 2 split in
// two parts, so r is exact to float), |r| <= ln 2 / 2 and
//   exp(x) = 2^n · exp(r),   exp(r) ≈ 1 + r + r² · P(r),  P of degree 5 (Cephes's minimax coefficients),
// within 2 ulp of exp over float's range (tests/autograd/test_kernels.cpp checks it against std::exp).
// Below -87.34 the result would leave float's normal range: those lanes, -inf among them, give 0; NaN
// stays NaN (anomaly detection looks for it).
namespace {

float exp_fast_scalar(float x) {
  using namespace exp_constants;
  if (!(x >= kExpLow)) return x != x ? x : 0.0f;  // NaN stays NaN; -inf and underflow give 0
  x = std::min(x, kExpHigh);
  const float n = std::nearbyint(x * kLog2e);
  const float r = std::fma(-n, kLn2Lo, std::fma(-n, kLn2Hi, x));
  float p = kP0;
  for (float c : {kP1, kP2, kP3, kP4, kP5}) p = std::fma(p, r, c);
  return std::ldexp(std::fma(p, r * r, r) + 1.0f, static_cast<int>(n));
}

}  // namespace

void exp_shifted_fast(const float* x, float m, float* y, int64_t n) {
  using namespace exp_constants;
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 mv = _mm512_set1_ps(m);
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp_lanes(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv)));
#elif defined(__AVX2__) && defined(__FMA__)
  const __m256 mv = _mm256_set1_ps(m);
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp_lanes(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv)));
#endif
  for (; i < n; ++i) y[i] = exp_fast_scalar(x[i] - m);
}

}  // namespace tapegrad
