#pragma once
// Matrix products of a few dozen rows on register tiles: C (+)= alpha · A B with A read through any two
// strides and B's rows contiguous, kLanes floats a vector. No packing and no library call: for the products
// of a small head (`small`'s are 32 × 32 × 16) an sgemm call's set-up and packing cost as much as its FMAs.
// Flash attention's tiles (flash_attention_tiles.cpp) are built on it, and gemm_on_this_thread
// (kernels/gemm.h) gives it the small float products of the linear layers and the fused attention's heads.
//
// Built where the compiler targets AVX2 + FMA (TAPEGRAD_REGISTER_TILES), with 8 floats a vector, and with
// 16 too where it targets AVX-512 (kLanes, the widest); elsewhere the callers keep their BLAS paths.
#include <algorithm>
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)  // and AVX-512 where the target has it
#define TAPEGRAD_REGISTER_TILES 1
#include <immintrin.h>

namespace tapegrad::register_tiles {

// The few operations the kernels use, once per vector width so that each kernel is written once: 8 floats
// (__m256, AVX2 + FMA) always, 16 (__m512) with AVX-512. An AVX-512 build has both: products whose width is
// a multiple of 8 but not of 16 take the narrow tiles. Kernels are templates on the lane count, not on the
// vector type (GCC drops a vector type's attributes from a template argument, -Wignored-attributes).
template <int64_t L>
struct VectorOf;
template <int64_t L>
using Vector = typename VectorOf<L>::type;  // L floats

template <int64_t L>
Vector<L> load(const float* p);
template <int64_t L>
Vector<L> splat(float x);

template <>
struct VectorOf<8> {
  using type = __m256;
};
template <>
inline __m256 load<8>(const float* p) { return _mm256_loadu_ps(p); }
template <>
inline __m256 splat<8>(float x) { return _mm256_set1_ps(x); }
inline void store(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
/// The first `lanes` (< 8) lanes only, the others read as 0 or left unwritten: a row's last, partial vector.
inline __m256i first_lanes_8(int64_t lanes) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(lanes)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
template <int64_t L>
Vector<L> load_first(const float* p, int64_t lanes);
template <>
inline __m256 load_first<8>(const float* p, int64_t lanes) { return _mm256_maskload_ps(p, first_lanes_8(lanes)); }
inline void store_first(float* p, __m256 v, int64_t lanes) { _mm256_maskstore_ps(p, first_lanes_8(lanes), v); }
inline __m256 multiply_add(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }  // a·b + c
inline __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
inline __m256 subtract(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }
inline __m256 multiply(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
inline __m256 maximum(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
/// v, with its -inf lanes set to 0
inline __m256 zero_minus_infinity(__m256 v) {
  return _mm256_andnot_ps(_mm256_cmp_ps(v, _mm256_set1_ps(-__builtin_inff()), _CMP_EQ_OQ), v);
}

#if defined(__AVX512F__)
template <>
struct VectorOf<16> {
  using type = __m512;
};
template <>
inline __m512 load<16>(const float* p) { return _mm512_loadu_ps(p); }
template <>
inline __m512 splat<16>(float x) { return _mm512_set1_ps(x); }
inline void store(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
template <>
inline __m512 load_first<16>(const float* p, int64_t lanes) {
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << lanes) - 1), p);
}
inline void store_first(float* p, __m512 v, int64_t lanes) {
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << lanes) - 1), v);
}
inline __m512 multiply_add(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }  // a·b + c
inline __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
inline __m512 subtract(__m512 a, __m512 b) { return _mm512_sub_ps(a, b); }
inline __m512 multiply(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
// The all-lanes mask spares GCC 12's warning about the undefined vector _mm512_max_ps starts from
// (https://gcc.gnu.org/PR105593); the instruction is the same.
inline __m512 maximum(__m512 a, __m512 b) { return _mm512_maskz_max_ps(0xFFFF, a, b); }
/// v, with its -inf lanes set to 0
inline __m512 zero_minus_infinity(__m512 v) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_set1_ps(-__builtin_inff()), _CMP_NEQ_UQ), v);
}
inline constexpr int64_t kLanes = 16;  // the widest vector of the build
#else
inline constexpr int64_t kLanes = 8;
#endif
inline constexpr int64_t kNarrowLanes = 8;
using Lanes = Vector<kLanes>;

inline constexpr int kTileRows = 6;  // a tile is kTileRows × 2 vectors: 12 accumulators, 2 loads, 6 broadcasts a step

/// c[r][L·v + l] = (accumulate ? c[r][L·v + l] : 0) + alpha · sum_k a(r, k) · b_k[L·v + l], for r < R, v < NV,
/// vectors of L lanes: a(r, k) = a[r · a_row + k · a_k] is broadcast, b_k = b + k · ldb is loaded, the R × NV
/// sums stay in registers for all K steps. Only the first last_lanes lanes of c's last vector are read and
/// written (b's are loaded whole: the caller pads b's rows to whole vectors).
template <int64_t L, int R, int NV>
inline void tile(const float* a, int64_t a_row, int64_t a_k, const float* b, int64_t ldb, int64_t K, float* c,
                 int64_t ldc, float alpha, bool accumulate, int64_t last_lanes) {
  using V = Vector<L>;
  V acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    // c's lines asked for now, K steps before they are read or written: a large product's c comes from L3
    // or memory, and the tile would otherwise wait for all of them at its end (on Zen 4, medium's products
    // 5-11% faster on one core and two; docs/performance.md).
    const char* c_row = reinterpret_cast<const char*>(c + r * ldc);
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) _mm_prefetch(c_row + sizeof(float) * L * v, _MM_HINT_T0);
    _mm_prefetch(c_row + sizeof(float) * L * NV - 1, _MM_HINT_T0);  // the row's last line, when c is unaligned
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = splat<L>(0.0f);
  }
  for (int64_t k = 0; k < K; ++k) {
    V bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bv[v] = load<L>(b + k * ldb + L * v);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V av = splat<L>(a[r * a_row + k * a_k]);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = multiply_add(av, bv[v], acc[r][v]);
    }
  }
  const V scale = splat<L>(alpha);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      float* to = c + r * ldc + L * v;
      const V x = multiply(acc[r][v], scale);
      if (v == NV - 1 && last_lanes < L)
        store_first(to, accumulate ? add(load_first<L>(to, last_lanes), x) : x, last_lanes);
      else
        store(to, accumulate ? add(load<L>(to), x) : x);
    }
}

using TileFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t, float, bool,
                       int64_t);
template <int64_t L>
inline constexpr TileFn kTwoVectorTiles[kTileRows] = {tile<L, 1, 2>, tile<L, 2, 2>, tile<L, 3, 2>,
                                                      tile<L, 4, 2>, tile<L, 5, 2>, tile<L, 6, 2>};
template <int64_t L>
inline constexpr TileFn kOneVectorTiles[kTileRows] = {tile<L, 1, 1>, tile<L, 2, 1>, tile<L, 3, 1>,
                                                      tile<L, 4, 1>, tile<L, 5, 1>, tile<L, 6, 1>};

/// C (rows × L·vectors, leading dim ldc) = (accumulate ? C : 0) + alpha · A B on vectors of L lanes, with
/// A(r, k) = a[r·a_row + k·a_k] (rows × K) and B's row k the `vectors` vectors at b + k·ldb. Column pairs
/// outside, so that a pair of B's columns (K × 2·L numbers) stays in L1 while the rows of A stream past it.
/// The rows are cut into tiles as even as kTileRows allows (32 rows: 6, 6, 5, 5, 5, 5, not five 6s and a 2):
/// a tile of few rows has too few independent sums to hide the FMA latency. C's last vector may be partial:
/// only its first last_lanes columns are read and written (B's rows are read as whole vectors).
template <int64_t L = kLanes>
inline void tile_product(int64_t rows, int64_t vectors, int64_t K, const float* a, int64_t a_row, int64_t a_k,
                         const float* b, int64_t ldb, float* c, int64_t ldc, float alpha, bool accumulate,
                         int64_t last_lanes = L) {
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
  for (int64_t v0 = 0; v0 < vectors; v0 += 2) {
    const TileFn* kernels = vectors - v0 >= 2 ? kTwoVectorTiles<L> : kOneVectorTiles<L>;
    const int64_t lanes = v0 + 2 >= vectors ? last_lanes : L;  // of the pair's last vector
    for (int64_t t = 0, r0 = 0; t < tiles; ++t) {
      const int64_t height = rows / tiles + (t < rows % tiles ? 1 : 0);
      kernels[height - 1](a + r0 * a_row, a_row, a_k, b + L * v0, ldb, K, c + r0 * ldc + L * v0, ldc, alpha,
                          accumulate, lanes);
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

/// Matrix m (rows × cols, rows ld apart) transposed into t (cols × `lanes`, leading dim ldt), lanes from
/// `rows` on set to 0: a block padded to whole vectors, whose padding lanes compute on zeros, not garbage.
inline void transpose_padded(const float* m, int64_t ld, int64_t rows, int64_t cols, float* t, int64_t ldt,
                             int64_t lanes) {
  for (int64_t c = 0; c < cols; ++c) {
    float* to = t + c * ldt;
    for (int64_t r = 0; r < rows; ++r) to[r] = m[r * ld + c];
    std::fill(to + rows, to + lanes, 0.0f);
  }
}

}  // namespace tapegrad::register_tiles
#endif
