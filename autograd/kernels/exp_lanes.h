#pragma once
// exp of a vector of float lanes, sixteen (AVX-512) or eight (AVX2 + FMA): the lane form of
// exp_shifted_fast (Cephes's expf, derived in exp.cpp), inline so that a kernel takes the exponentials of
// registers it already holds (flash attention's tiles apply a different shift to each lane).
namespace tapegrad::exp_constants {
inline constexpr float kExpLow = -87.336544f;  // exp(kExpLow) = FLT_MIN
inline constexpr float kExpHigh = 88.72283f;   // exp(kExpHigh) is float's largest
inline constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
inline constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                       kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
}  // namespace tapegrad::exp_constants

#if defined(__AVX2__) && defined(__FMA__) || defined(__AVX512F__)
#include <immintrin.h>

namespace tapegrad {

#if defined(__AVX512F__)
/// exp(v) per lane within 2 ulp of std::exp: below kExpLow (-inf among them) 0, NaN stays NaN. min and
/// roundscale take the all-lanes mask: their plain forms start from an undefined vector that GCC 12 warns
/// of as maybe uninitialised (https://gcc.gnu.org/PR105593); the instructions are the same.
inline __m512 exp_lanes(__m512 v) {
  using namespace exp_constants;
  const __mmask16 live = _mm512_cmp_ps_mask(v, _mm512_set1_ps(kExpLow), _CMP_NLT_UQ);  // false for -inf, underflow
  v = _mm512_maskz_min_ps(0xFFFF, _mm512_set1_ps(kExpHigh), v);                        // a NaN v stays NaN
  const __m512 k = _mm512_maskz_roundscale_ps(0xFFFF, _mm512_mul_ps(v, _mm512_set1_ps(kLog2e)),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Lo), _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Hi), v));
  __m512 p = _mm512_set1_ps(kP0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
  const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(live, e, k);  // e · 2^k, 0 where not live
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
/// exp(v) per lane within 2 ulp of std::exp: below kExpLow (-inf among them) 0, NaN stays NaN.
inline __m256 exp_lanes(__m256 v) {
  using namespace exp_constants;
  const __m256 live = _mm256_cmp_ps(v, _mm256_set1_ps(kExpLow), _CMP_NLT_UQ);  // false for -inf and underflow only
  v = _mm256_min_ps(_mm256_set1_ps(kExpHigh), v);                              // a NaN v stays NaN
  const __m256 k =
      _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2Lo), _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2Hi), v));
  __m256 p = _mm256_set1_ps(kP0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
  const __m256 e = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  // 2^k as float bits: (k + 127) << 23; k is in [-126, 128] here, and k = 128 (v near 88.72) is split as
  // 2^(k/2) · 2^(k - k/2).
  const __m256i ki = _mm256_cvtps_epi32(k);
  const __m256i half = _mm256_srai_epi32(ki, 1);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
  const __m256 s2 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ki, half), _mm256_set1_epi32(127)), 23));
  return _mm256_and_ps(live, _mm256_mul_ps(_mm256_mul_ps(e, s1), s2));
}
#endif

}  // namespace tapegrad
#endif
