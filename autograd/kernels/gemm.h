#pragma once
// Matrix products of strided tensors: the kernels behind matmul and linear (autograd/ops/matmul.cpp).
// Each operand's matrices are read in place through BLAS's transpose flags and leading dims, batch dims
// broadcast, and the work is split across tapegrad's threads (each part one single-threaded BLAS call, or
// for a small float product the register tiles: gemm_on_this_thread).
// batched_gemm_reference is the same product as a plain triple loop in double, for the tests.
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace tapegrad {

/// How BLAS reads the last two dims (rows, cols) of a strided tensor in place: row-major with leading
/// dim `ld`, transposed when the tensor's column stride is the large one.
struct MatrixLayout {
  bool transposed = false;
  int64_t ld = 1;
};

/// The in-place layout when one exists (unit stride along one of the two dims, the other a valid
/// leading dim); std::nullopt means BLAS cannot read it as is and it must be copied first.
std::optional<MatrixLayout> blas_layout(const Tensor& t);

/// True when several of the products over `batch` land in one slice of an operand or result of this
/// shape: its batch dims are broadcast (a gradient of a broadcast operand sums them).
bool shares_slices(const Shape& shape, const Shape& batch);

/// c[batch] (+)= op(a[batch]) @ op(b[batch]) for every index of `batch`, where each operand's matrices
/// may be transposed views (`flip_*` transposes the operand once more, for the backward products) and
/// its batch dims broadcast; a and b must have a blas_layout. c is contiguous of shape (c_batch..., M, N);
/// when c's batch dims are broadcast (shares_slices: a gradient of a broadcast operand) several products
/// land in one slice and add up, which needs beta = 1. beta is BLAS's: 0 writes c, 1 adds into it.
template <class T>
void batched_gemm(const Tensor& a, bool flip_a, const Tensor& b, bool flip_b, Tensor& c, const Shape& batch, T beta);
/// batched_gemm with beta = accumulate ? 1 : 0 in the operands' float type.
void batched_gemm(const Tensor& a, bool flip_a, const Tensor& b, bool flip_b, Tensor& c, const Shape& batch,
                  bool accumulate);
/// The same product, one element at a time: c = beta · c + sum over the products landing in each slice of
/// sum_k op(a)_ik op(b)_kj, accumulated in double.
void batched_gemm_reference(const Tensor& a, bool flip_a, const Tensor& b, bool flip_b, Tensor& c,
                            const Shape& batch, double beta);

/// The largest op(b), k × n numbers, that gemm_on_this_thread gives to the register tiles whole: 192 KiB of
/// floats, so that it stays in L2 while blocks of a's rows pass over it (read in place, or copied in panels
/// when it is bᵀ). A larger op(b) runs in blocks of up to 256 × 256 where the tiles take large products
/// (AVX-512 builds, gemm.cpp), else on BLAS.
inline constexpr int64_t kTiledProductMaxB = 192 * 256;

/// c = alpha · op(a) op(b) + beta · c on the calling thread, as blas_gemm takes it: on the register tiles
/// (kernels/register_tiles.h) for float products with n a multiple of 8 (16-lane tiles where it is a multiple
/// of 16 on AVX-512 builds) or op(b) = bᵀ and n ≥ 32 (copied transposed, its last vector padded), beta 0 or 1
/// and op(b) of at most kTiledProductMaxB numbers, or of any size on AVX-512 builds, else one BLAS call.
/// Small products are a small model's linear layers and attention heads (n and k of a few dozen to a few
/// hundred), where OpenBLAS spends as long packing its operands as in its kernel; the large ones are
/// measured in kernels/gemm.cpp.
template <class T>
void gemm_on_this_thread(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                         const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

/// Rows [begin, end) of a matrix.
using RowRun = std::pair<int64_t, int64_t>;

/// The runs of rows of m (rows × cols, row-major with leading dim ld) that hold a non-zero, in order, into
/// `runs` (its memory reused). A gap of fewer than `min_gap` all-zero rows stays inside its run: a product
/// over a few zero rows costs less than a second call. Each row is read up to its first non-zero, so a
/// dense matrix costs about one element a row. A NaN counts as non-zero.
template <class T>
void nonzero_row_runs(const T* m, int64_t rows, int64_t cols, int64_t ld, int64_t min_gap, std::vector<RowRun>& runs);

/// Each of the `rows` rows of out (rows, n) set to `row` (n): a linear layer's output starting as its bias.
template <class T>
void repeat_row(const T* row, T* out, int64_t rows, int64_t n);

}  // namespace tapegrad
