#pragma once
// The BLAS behind every matrix product, and which of its kernels run.
#include <cstdint>
#include <string>

namespace tapegrad {

/// Which BLAS runs tapegrad's matrix products, with which kernels, and why those.
struct BlasInfo {
  std::string library;     // "OpenBLAS 0.3.21 ..." (the library's own configuration string)
  std::string kernels;     // the kernel family in use, as the library names it ("SkylakeX", "Haswell", ...)
  int threads = 1;         // threads the BLAS itself may use (tapegrad's pool owns the others)
  std::string how_chosen;  // "OPENBLAS_CORETYPE=...", "chosen by tapegrad: ...", or "the library's own choice"
  std::string advice;      // empty, or what the user could change to get faster kernels
};

/// What the BLAS runs with now. The kernel choice is made once, when the library loads (see blas.cpp).
BlasInfo blas_info();

/// c = alpha · op(a) op(b) + beta · c on row-major matrices (op transposes when trans_*), one BLAS call
/// on the calling thread: sgemm / dgemm.   op(a): (m, k), op(b): (k, n), c: (m, n)
void blas_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void blas_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
               int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

}  // namespace tapegrad
