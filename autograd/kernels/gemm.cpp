// Matrix products of strided tensors on BLAS or the register tiles, split across tapegrad's threads (see
// gemm.h).
#include "autograd/kernels/gemm.h"

#include <algorithm>
#include <array>
#include <type_traits>
#include <vector>

#include "autograd/blas.h"
#include "autograd/iterate.h"
#include "autograd/kernels/register_tiles.h"
#include "autograd/kernels/row_reductions.h"
#include "autograd/kernels/scratch.h"
#include "autograd/parallel.h"

namespace tapegrad {

namespace {

struct TransposedOperandScratch;  // op(b)'s block copied for the register tiles (kernels/scratch.h)

#ifdef TAPEGRAD_REGISTER_TILES
constexpr int64_t kTiledProductRows = 48;    // 8 tiles of 6 rows
constexpr int64_t kTiledBlockColumns = 256;
/// The blocks op(b) runs in on the tiles: at most 256 × 256 numbers (256 KiB, a quarter of a Zen 4 core's L2),
/// so that a depth of 256 (d_model) is one block: on Zen 4 `medium`'s twelve products ran 0.6-6.7% faster
/// each (1.5% in all) than in blocks of 192 × 256, whose depth-64 remainder passed over c once more. A
/// product whose op(b) is under kTiledProductMaxB is one block.
constexpr int64_t kTiledBlockNumbers = 256 * kTiledBlockColumns;

/// Products whose op(b) exceeds kTiledProductMaxB run on the tiles too, block by block, where the vectors
/// are AVX-512's: on Zen 4 the blocked tiles ran a medium model's products at 91-110 GFLOP/s on one core
/// against OpenBLAS's 92-103, and `small` and `lm` 3-17% faster a step (docs/performance.md). On AVX2
/// (Zen 3) the blocked tiles ran `medium`'s step at 0.91x and `small`'s at 0.92-0.94x (its dW products):
/// those products stay on BLAS.
constexpr bool kTilesTakeLargeProducts = register_tiles::kLanes == 16;
#endif

}  // namespace

template <class T>
void gemm_on_this_thread(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                         const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
#ifdef TAPEGRAD_REGISTER_TILES
  using register_tiles::kLanes, register_tiles::kNarrowLanes, register_tiles::tile_product;
  if constexpr (std::is_same_v<T, float>) {
    const bool large = k * n > kTiledProductMaxB, whole_vectors = n % kNarrowLanes == 0;
    // n a multiple of 8, or n of at least 32 when op(b) = bᵀ is copied anyway: its last panel is padded with
    // zero columns to whole vectors, and the tiles write only c's n columns. An attention head's scores at a
    // length such as 94 (D = 32) ran 1.2-1.75x faster on them than on OpenBLAS on Zen 4 (T = 35-94); at T = 12,
    // where the padded copy costs as much as the product, 0.55x: such products stay on BLAS.
    constexpr int64_t kPaddedFrom = 32;
    if ((whole_vectors || (trans_b && n >= kPaddedFrom)) && (beta == 0 || beta == 1) &&
        (!large || kTilesTakeLargeProducts)) {
      const bool narrow = whole_vectors && n % kLanes != 0;  // 8-lane vectors
      const int64_t lanes = narrow ? kNarrowLanes : kLanes;
      const auto whole = [lanes](int64_t columns) { return (columns + lanes - 1) / lanes * lanes; };
      // op(b) in blocks of depth × cols ≤ kTiledBlockNumbers numbers (one block for a small product), each
      // product of a block summed into c: c (beta = 1) or the blocks before it add.
      const int64_t nc = std::min(n, kTiledBlockColumns), kc = std::max<int64_t>(1, kTiledBlockNumbers / whole(nc));
      const int64_t a_row = trans_a ? 1 : lda, a_k = trans_a ? lda : 1;
      const auto tiles = narrow ? tile_product<kNarrowLanes> : tile_product<kLanes>;
      for (int64_t j0 = 0; j0 < n; j0 += nc) {
        const int64_t cols = std::min(nc, n - j0);
        for (int64_t p0 = 0; p0 < k; p0 += kc) {
          const int64_t depth = std::min(kc, k - p0);
          const float* block = b + p0 * ldb + j0;
          int64_t ld_block = ldb;
          // op(b) = bᵀ is copied transposed, so that the tiles load its rows as vectors, in panels of a tile's
          // two vectors of columns (depth × 2·lanes numbers each, panel jp at copy + jp · depth): a tile's rows
          // of b are then adjacent, not `cols` floats apart (1 KiB for 256, rows that fall into the same few
          // L1 sets). On Zen 4 the forward products of `medium` ran 6-12% faster in panels than as one
          // transposed block, and `small`'s step 4-6% (docs/performance.md).
          if (trans_b || (large && ldb != cols)) {
            // Always the largest block's size: which thread runs which part can change from step to step,
            // and a step must not grow a thread's scratch (0 heap allocations a step).
            float* copy = scratch<float, TransposedOperandScratch>(kTiledBlockNumbers);
            if (trans_b)
              for (int64_t jp = 0; jp < cols; jp += 2 * lanes) {
                const int64_t width = std::min(2 * lanes, cols - jp), padded = whole(width);
                const float* columns = b + (j0 + jp) * ldb + p0;  // op(b)'s columns are b's rows
                float* panel = copy + jp * depth;
                if (width == padded) register_tiles::transpose_into(columns, ldb, width, depth, panel);
                else register_tiles::transpose_padded(columns, ldb, width, depth, panel, padded, padded);
              }
            else  // a block of a large b copied contiguous: rows a power of two apart fall into few L1 sets
              for (int64_t p = 0; p < depth; ++p) std::copy(block + p * ldb, block + p * ldb + cols, copy + p * cols);
            block = copy;
            ld_block = cols;
          }
          // Blocks of 48 rows outside, op(b)'s panels inside: a panel (depth × 2 vectors) serves the block's 8
          // row tiles from L1, and the block's rows of a serve every panel from L2.
          const int64_t panel_cols = trans_b ? 2 * lanes : cols;
          for (int64_t r0 = 0; r0 < m; r0 += kTiledProductRows)
            for (int64_t jp = 0; jp < cols; jp += panel_cols) {
              const int64_t width = std::min(panel_cols, cols - jp), padded = whole(width);
              tiles(std::min(kTiledProductRows, m - r0), padded / lanes, depth, a + r0 * a_row + p0 * a_k, a_row, a_k,
                    trans_b ? block + jp * depth : block + jp, trans_b ? padded : ld_block, c + r0 * ldc + j0 + jp,
                    ldc, alpha, beta == 1 || p0 > 0, lanes - (padded - width));
            }
        }
      }
      return;
    }
  }
#endif
  blas_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template void gemm_on_this_thread<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                         const float*, int64_t, float, float*, int64_t);
template void gemm_on_this_thread<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                                          const double*, int64_t, double, double*, int64_t);

namespace {

/// Strides of t's batch dims as if broadcast to `batch` (0 along broadcast dims).
Shape batch_strides(const Tensor& t, const Shape& batch) {
  Shape strides;
  const int shift = batch.rank() - (t.dim() - 2);
  for (int i = 0; i < batch.rank(); ++i) {
    const int j = i - shift;
    strides.push_back(j < 0 || t.shape()[j] == 1 ? 0 : t.strides()[j]);
  }
  return strides;
}

// Parts are whole multiples of this many rows (or columns), so that BLAS's register tiles stay full.
constexpr int64_t kPartAlign = 32;

/// The partial products of gemm_split_along_depth (kernels/scratch.h).
struct DepthPartials;

/// c (+)= op(a) op(b) split across `parts` threads along the depth k: part p multiplies its run of k
/// (columns of op(a), rows of op(b)) into a partial product, part 0 into c itself (with beta), the others
/// into the caller's scratch, and then each element of c adds the other parts' in part order. The sum of
/// each element is regrouped by parts, so it depends on the thread count (within the rounding the tests
/// state) but never on timing.
template <class T>
void gemm_split_along_depth(int64_t parts, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a,
                            int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const int64_t blocks = (k + kPartAlign - 1) / kPartAlign;
  T* partials = scratch<T, DepthPartials>((parts - 1) * m * n);  // the caller's: grown once, then reused
  parallel_for(parts, 1, [&](int64_t first, int64_t last) {
    for (int64_t p = first; p < last; ++p) {
      const int64_t from = blocks * p / parts * kPartAlign, to = std::min(k, blocks * (p + 1) / parts * kPartAlign);
      const T* a_part = trans_a ? a + from * lda : a + from;
      const T* b_part = trans_b ? b + from : b + from * ldb;
      if (p == 0) gemm_on_this_thread(trans_a, trans_b, m, n, to - from, T(1), a_part, lda, b_part, ldb, beta, c, ldc);
      else
        gemm_on_this_thread(trans_a, trans_b, m, n, to - from, T(1), a_part, lda, b_part, ldb, T(0),
                            partials + (p - 1) * m * n, n);
    }
  });
  parallel_for(m, grain_for_elements(n * (parts - 1)), [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i)
      for (int64_t p = 1; p < parts; ++p) {
        const T* partial = partials + ((p - 1) * m + i) * n;
        T* row = c + i * ldc;
        for (int64_t j = 0; j < n; ++j) row[j] += partial[j];
      }
  });
}

/// c (+)= op(a) op(b), (m × n) row-major, split across tapegrad's threads; each part is one
/// gemm_on_this_thread. The split depends only on the shapes and the thread count, so results do not
/// depend on timing.
/// - When the depth k is the longest side (a weight gradient dW = dYᵀ X, summed over a batch's rows), along
///   k (gemm_split_along_depth): each thread multiplies the rows of dY and X that the row kernels and the
///   products split by rows gave it, which its own core's cache still holds. Split along dW's rows instead,
///   each thread read every row of X, half of them from the other core: on a Zen 3, reading 256 KiB
///   another core wrote took 27.6 µs against 7.7 from the core's own L2, and `small`'s linear backward ran
///   1.06-1.11x faster along k on two threads (docs/performance.md).
/// - Else along the longer side of c (rows of op(a) or columns of op(b)), every element of c computed
///   whole by one call.
template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  const int64_t longer = std::max(m, n), blocks = (longer + kPartAlign - 1) / kPartAlign;
  if (k > longer) {
    const int64_t depth_blocks = (k + kPartAlign - 1) / kPartAlign;
    const int64_t parts = std::min<int64_t>(num_threads(), depth_blocks / grain_for_flops(2 * m * n * kPartAlign));
    if (parts > 1) {
      gemm_split_along_depth(parts, trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
      return;
    }
  }
  const int64_t block_flops = 2 * k * std::min(m, n) * kPartAlign;
  const int64_t grain = grain_for_flops(block_flops);
  parallel_for(blocks, grain, [&](int64_t first, int64_t last) {
    const int64_t from = first * kPartAlign, to = std::min(longer, last * kPartAlign);
    if (m >= n)  // rows [from, to) of c: rows of op(a)
      gemm_on_this_thread(trans_a, trans_b, to - from, n, k, T(1), trans_a ? a + from : a + from * lda, lda, b, ldb,
                          beta, c + from * ldc, ldc);
    else  // columns [from, to) of c: columns of op(b)
      gemm_on_this_thread(trans_a, trans_b, m, to - from, k, T(1), a, lda, trans_b ? b + from * ldb : b + from, ldb,
                          beta, c + from, ldc);
  });
}

}  // namespace

std::optional<MatrixLayout> blas_layout(const Tensor& t) {
  const int r = t.dim();
  const int64_t rows = t.shape()[r - 2], cols = t.shape()[r - 1];
  const int64_t row_stride = t.strides()[r - 2], col_stride = t.strides()[r - 1];
  if (rows == 0 || cols == 0) return MatrixLayout{false, std::max<int64_t>(cols, 1)};  // nothing is read
  if (col_stride == 1 || cols == 1) {
    const int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : row_stride;
    if (ld >= std::max<int64_t>(cols, 1)) return MatrixLayout{false, ld};
  }
  if (row_stride == 1 || rows == 1) {
    const int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : col_stride;
    if (ld >= std::max<int64_t>(rows, 1)) return MatrixLayout{true, ld};
  }
  return std::nullopt;
}

/// True when several of the products over `batch` land in one slice of an operand or result of this
/// shape: its batch dims are broadcast (a gradient of a broadcast operand sums them).
bool shares_slices(const Shape& shape, const Shape& batch) {
  const int shift = batch.rank() - (shape.rank() - 2);
  for (int i = 0; i < batch.rank(); ++i)
    if (batch[i] > 1 && (i < shift || shape[i - shift] == 1)) return true;
  return false;
}

template <class T>
void batched_gemm(const Tensor& a, bool flip_a, const Tensor& b, bool flip_b, Tensor& c, const Shape& batch, T beta) {
  const Shape c_strides = batch_strides(c, batch);
  const bool shared_c = shares_slices(c.shape(), batch);  // several products land in one slice of c
  if (shared_c && beta == T(0))
    throw AutogradError(cat("matmul: products that sum into one slice of ", c.shape(), " must add (beta = 1)"));
  const MatrixLayout la = *blas_layout(a), lb = *blas_layout(b);
  const int ra = a.dim(), rb = b.dim(), rc = c.dim();
  const int64_t m = c.shape()[rc - 2], n = c.shape()[rc - 1];
  const int64_t k = flip_a ? a.shape()[ra - 2] : a.shape()[ra - 1];
  if (m == 0 || n == 0) return;
  const bool trans_a = la.transposed != flip_a, trans_b = lb.transposed != flip_b;
  {
    const T *pa = a.data<T>(), *pb = b.data<T>();
    T* pc = c.data<T>();
    // Every product's offsets into a, b and c (a buffer kept per thread: no allocation in steady state).
    thread_local std::vector<std::array<int64_t, 3>> this_threads_offsets;
    std::vector<std::array<int64_t, 3>>& offsets = this_threads_offsets;  // the workers read the caller's
    offsets.clear();
    for_each_row<3>(batch, {c_strides, batch_strides(a, batch), batch_strides(b, batch)},
                    [&](auto off, int64_t count, auto step) {
                      for (int64_t i = 0; i < count; ++i)
                        offsets.push_back({off[0] + i * step[0], off[1] + i * step[1], off[2] + i * step[2]});
                    });
    auto product = [&](const std::array<int64_t, 3>& off, bool split) {
      T* out = pc + off[0];
      if (k == 0) {  // an empty sum: c = beta · c
        if (beta == T(0)) std::fill(out, out + m * n, T(0));
        return;
      }
      if (split) gemm(trans_a, trans_b, m, n, k, pa + off[1], la.ld, pb + off[2], lb.ld, beta, out, n);
      else gemm_on_this_thread(trans_a, trans_b, m, n, k, T(1), pa + off[1], la.ld, pb + off[2], lb.ld, beta, out, n);
    };
    const int64_t count = static_cast<int64_t>(offsets.size());
    if (count == 1 || shared_c) {  // one product, or products that add into one slice: in order, each split
      for (const auto& off : offsets) product(off, true);
      return;
    }
    // Products that own their slices of c (the heads of attention): whole products spread over the threads.
    const int64_t grain = grain_for_flops(2 * m * n * k);
    parallel_for(count, grain, [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) product(offsets[i], false);
    });
  }
  (void)rb;
}

template void batched_gemm<float>(const Tensor&, bool, const Tensor&, bool, Tensor&, const Shape&, float);
template void batched_gemm<double>(const Tensor&, bool, const Tensor&, bool, Tensor&, const Shape&, double);

/// batched_gemm with beta from a bool, for the forward products (whose c is never shared).
void batched_gemm(const Tensor& a, bool flip_a, const Tensor& b, bool flip_b, Tensor& c, const Shape& batch,
                  bool accumulate) {
  dispatch_float(a.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    batched_gemm(a, flip_a, b, flip_b, c, batch, accumulate ? T(1) : T(0));
  });
}

void batched_gemm_reference(const Tensor& a, bool flip_a, const Tensor& b, bool flip_b, Tensor& c,
                            const Shape& batch, double beta) {
  const int ra = a.dim(), rb = b.dim(), rc = c.dim();
  const int64_t m = c.shape()[rc - 2], n = c.shape()[rc - 1];
  const int64_t k = flip_a ? a.shape()[ra - 2] : a.shape()[ra - 1];
  // element (i, j) of op(t): t's (i, j), or its (j, i) when flipped
  auto at = [](const Shape& s, int r, bool flip, int64_t i, int64_t j) {
    return flip ? j * s[r - 2] + i * s[r - 1] : i * s[r - 2] + j * s[r - 1];
  };
  dispatch_float(c.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    const T *pa = a.data<T>(), *pb = b.data<T>();
    T* pc = c.data<T>();
    for_each_row<1>(c.shape(), {c.strides()}, [&](auto off, int64_t count, auto step) {  // c = beta · c
      for (int64_t q = 0; q < count; ++q) {
        T& v = pc[off[0] + q * step[0]];
        v = beta == 0 ? T(0) : static_cast<T>(beta * v);
      }
    });
    for_each_row<3>(batch, {batch_strides(c, batch), batch_strides(a, batch), batch_strides(b, batch)},
                    [&](auto off, int64_t count, auto step) {
                      for (int64_t q = 0; q < count; ++q)
                        for (int64_t i = 0; i < m; ++i)
                          for (int64_t j = 0; j < n; ++j) {
                            double sum = 0;
                            for (int64_t l = 0; l < k; ++l)
                              sum += static_cast<double>(pa[off[1] + q * step[1] + at(a.strides(), ra, flip_a, i, l)]) *
                                     pb[off[2] + q * step[2] + at(b.strides(), rb, flip_b, l, j)];
                            T& v = pc[off[0] + q * step[0] + at(c.strides(), rc, false, i, j)];
                            v = static_cast<T>(v + sum);
                          }
                    });
  });
}

template <class T>
void nonzero_row_runs(const T* m, int64_t rows, int64_t cols, int64_t ld, int64_t min_gap, std::vector<RowRun>& runs) {
  thread_local std::vector<uint8_t> this_threads_flags;  // the workers write the caller's
  std::vector<uint8_t>& nonzero = this_threads_flags;
  nonzero.resize(static_cast<size_t>(rows));
  parallel_for(rows, grain_for_elements(cols), [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) nonzero[r] = row_has_nonzero(m + r * ld, cols);
  });
  runs.clear();
  for (int64_t r = 0; r < rows;) {
    if (!nonzero[r]) {
      ++r;
      continue;
    }
    int64_t end = r + 1;
    while (end < rows && nonzero[end]) ++end;
    if (!runs.empty() && r - runs.back().second < min_gap) runs.back().second = end;  // a short gap: join
    else runs.emplace_back(r, end);
    r = end;
  }
}

template void nonzero_row_runs<float>(const float*, int64_t, int64_t, int64_t, int64_t, std::vector<RowRun>&);
template void nonzero_row_runs<double>(const double*, int64_t, int64_t, int64_t, int64_t, std::vector<RowRun>&);

template <class T>
void repeat_row(const T* row, T* out, int64_t rows, int64_t n) {
  if (rows == 0 || n == 0) return;
  // In each thread's part, a stamp of about 4 KiB of rows, then the stamp copied block by block: a few
  // copies of a size that memcpy moves fastest, instead of one short call per row.
  const int64_t stamp_rows = std::max<int64_t>(4096 / static_cast<int64_t>(n * sizeof(T)), 1);
  parallel_for(rows, grain_for_elements(n), [&](int64_t first, int64_t last) {
    T* part = out + first * n;
    const int64_t count = last - first, stamp = std::min(stamp_rows, count);
    for (int64_t r = 0; r < stamp; ++r) std::copy(row, row + n, part + r * n);
    for (int64_t r = stamp; r < count; r += stamp) std::copy(part, part + std::min(stamp, count - r) * n, part + r * n);
  });
}

template void repeat_row<float>(const float*, float*, int64_t, int64_t);
template void repeat_row<double>(const double*, double*, int64_t, int64_t);

}  // namespace tapegrad
