#pragma once
// Matrix products of a few dozen rows on register tiles: C (+)= alpha · A B with A read through any two
// strides and B's rows contiguous, kLanes floats a vector. No packing and no library call: for the products
// of a small head (`small`'s are 32 × 32 × 16) an sgemm call's set-up and packing cost as much as its FMAs.
// Flash attention's tiles (flash_attention_tiles.cpp) are built on it, and gemm_on_this_thread
// (kernels/gemm.h) gives it the small float products of the linear layers and the fused attention's heads.
//
// The vectors are as wide as the compiler's target allows (TAPEGRAD_REGISTER_TILES): 16 floats with
// AVX-512, 8 with AVX2 + FMA; without either the callers keep their BLAS paths. The few operations the
// kernels need on a vector of lanes are named below, once per width, so that each kernel is written once.
#include <cstdint>

#if defined(__AVX512F__) || defined(__AVX2__) && defined(__FMA__)
#define TAPEGRAD_REGISTER_TILES 1
#include <immintrin.h>

namespace tapegrad::register_tiles {

#if defined(__AVX512F__)
using Lanes = __m512;
inline constexpr int64_t kLanes = 16;
inline Lanes load(const float* p) { return _mm512_loadu_ps(p); }
inline void store(float* p, Lanes v) { _mm512_storeu_ps(p, v); }
inline Lanes splat(float x) { return _mm512_set1_ps(x); }
inline Lanes multiply_add(Lanes a, Lanes b, Lanes c) { return _mm512_fmadd_ps(a, b, c); }  // a·b + c
inline Lanes add(Lanes a, Lanes b) { return _mm512_add_ps(a, b); }
inline Lanes subtract(Lanes a, Lanes b) { return _mm512_sub_ps(a, b); }
inline Lanes multiply(Lanes a, Lanes b) { return _mm512_mul_ps(a, b); }
// The all-lanes mask spares GCC 12's warning about the undefined vector _mm512_max_ps starts from
// (https://gcc.gnu.org/PR105593); the instruction is the same.
inline Lanes maximum(Lanes a, Lanes b) { return _mm512_maskz_max_ps(0xFFFF, a, b); }
/// v, with its -inf lanes set to 0
inline Lanes zero_minus_infinity(Lanes v) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_set1_ps(-__builtin_inff()), _CMP_NEQ_UQ), v);
}
#else
using Lanes = __m256;
inline constexpr int64_t kLanes = 8;
inline Lanes load(const float* p) { return _mm256_loadu_ps(p); }
inline void store(float* p, Lanes v) { _mm256_storeu_ps(p, v); }
inline Lanes splat(float x) { return _mm256_set1_ps(x); }
inline Lanes multiply_add(Lanes a, Lanes b, Lanes c) { return _mm256_fmadd_ps(a, b, c); }  // a·b + c
inline Lanes add(Lanes a, Lanes b) { return _mm256_add_ps(a, b); }
inline Lanes subtract(Lanes a, Lanes b) { return _mm256_sub_ps(a, b); }
inline Lanes multiply(Lanes a, Lanes b) { return _mm256_mul_ps(a, b); }
inline Lanes maximum(Lanes a, Lanes b) { return _mm256_max_ps(a, b); }
/// v, with its -inf lanes set to 0
inline Lanes zero_minus_infinity(Lanes v) {
  return _mm256_andnot_ps(_mm256_cmp_ps(v, _mm256_set1_ps(-__builtin_inff()), _CMP_EQ_OQ), v);
}
#endif

inline constexpr int kTileRows = 6;  // a tile is kTileRows × 2 vectors: 12 accumulators, 2 loads, 6 broadcasts a step

/// c[r][kLanes·v + l] = (accumulate ? c[r][kLanes·v + l] : 0) + alpha · sum_k a(r, k) · b_k[kLanes·v + l], for
/// r < R, v < NV: a(r, k) = a[r · a_row + k · a_k] is broadcast, b_k = b + k · ldb is loaded, the R × NV sums
/// stay in registers for all K steps.
template <int R, int NV>
inline void tile(const float* a, int64_t a_row, int64_t a_k, const float* b, int64_t ldb, int64_t K, float* c,
                 int64_t ldc, float alpha, bool accumulate) {
  Lanes acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = splat(0.0f);
  for (int64_t k = 0; k < K; ++k) {
    Lanes bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bv[v] = load(b + k * ldb + kLanes * v);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const Lanes av = splat(a[r * a_row + k * a_k]);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = multiply_add(av, bv[v], acc[r][v]);
    }
  }
  const Lanes scale = splat(alpha);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      float* to = c + r * ldc + kLanes * v;
      const Lanes x = multiply(acc[r][v], scale);
      store(to, accumulate ? add(load(to), x) : x);
    }
}

using TileFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t, float, bool);
inline constexpr TileFn kTwoVectorTiles[kTileRows] = {tile<1, 2>, tile<2, 2>, tile<3, 2>,
                                                      tile<4, 2>, tile<5, 2>, tile<6, 2>};
inline constexpr TileFn kOneVectorTiles[kTileRows] = {tile<1, 1>, tile<2, 1>, tile<3, 1>,
                                                      tile<4, 1>, tile<5, 1>, tile<6, 1>};

/// C (rows × kLanes·vectors, leading dim ldc) = (accumulate ? C : 0) + alpha · A B, with A(r, k) =
/// a[r·a_row + k·a_k] (rows × K) and B's row k the `vectors` vectors at b + k·ldb. Column pairs outside, so
/// that a pair of B's columns (K × 2·kLanes numbers) stays in L1 while the rows of A stream past it. The rows
/// are cut into tiles as even as kTileRows allows (32 rows: 6, 6, 5, 5, 5, 5, not five 6s and a 2): a tile of
/// few rows has too few independent sums to hide the FMA latency.
inline void tile_product(int64_t rows, int64_t vectors, int64_t K, const float* a, int64_t a_row, int64_t a_k,
                         const float* b, int64_t ldb, float* c, int64_t ldc, float alpha, bool accumulate) {
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
  for (int64_t v0 = 0; v0 < vectors; v0 += 2) {
    const TileFn* kernels = vectors - v0 >= 2 ? kTwoVectorTiles : kOneVectorTiles;
    for (int64_t t = 0, r0 = 0; t < tiles; ++t) {
      const int64_t height = rows / tiles + (t < rows % tiles ? 1 : 0);
      kernels[height - 1](a + r0 * a_row, a_row, a_k, b + kLanes * v0, ldb, K, c + r0 * ldc + kLanes * v0, ldc, alpha,
                          accumulate);
      r0 += height;
    }
  }
}

/// t (cols × rows, leading dim rows) = mᵀ for m (rows × cols, rows ldm apart): the B operand tile_product
/// needs for a product with a transposed matrix. 8 × 8 blocks in AVX2 registers (AVX-512 CPUs have AVX2)
/// where rows and cols are multiples of 8 (eight loads, 24 shuffles, eight stores), element by element
/// otherwise.
inline void transpose_into(const float* m, int64_t ldm, int64_t rows, int64_t cols, float* t) {
  constexpr int64_t kBlock = 8;
  if (rows % kBlock != 0 || cols % kBlock != 0) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = m[r * ldm + c];
    return;
  }
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock)
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      __m256 x[8], y[8];
      for (int i = 0; i < 8; ++i) x[i] = _mm256_loadu_ps(m + (r0 + i) * ldm + c0);
      for (int i = 0; i < 8; i += 2) {  // pairs of rows interleaved: (a0 b0 a1 b1 | a4 b4 a5 b5), ...
        y[i] = _mm256_unpacklo_ps(x[i], x[i + 1]);
        y[i + 1] = _mm256_unpackhi_ps(x[i], x[i + 1]);
      }
      for (int i = 0; i < 8; i += 4) {  // then quadruples: (a0 b0 c0 d0 | a4 b4 c4 d4), ...
        x[i] = _mm256_shuffle_ps(y[i], y[i + 2], 0x44);
        x[i + 1] = _mm256_shuffle_ps(y[i], y[i + 2], 0xEE);
        x[i + 2] = _mm256_shuffle_ps(y[i + 1], y[i + 3], 0x44);
        x[i + 3] = _mm256_shuffle_ps(y[i + 1], y[i + 3], 0xEE);
      }
      // x[0..3] hold columns 0, 1, 2, 3 of rows 0-3 (low half) and columns 4-7 (high half); x[4..7] rows 4-7.
      float* to = t + c0 * rows + r0;
      for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(to + i * rows, _mm256_permute2f128_ps(x[i], x[i + 4], 0x20));
        _mm256_storeu_ps(to + (i + 4) * rows, _mm256_permute2f128_ps(x[i], x[i + 4], 0x31));
      }
    }
}

}  // namespace tapegrad::register_tiles
#endif
