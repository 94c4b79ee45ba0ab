// Choosing OpenBLAS's kernels for the CPU we run on.
//
// Debian's OpenBLAS (0.3.21) is built for many CPUs at once and picks a kernel family from CPUID when it
// loads. Products run twice as fast with the right family: on this project's Zen 5 machines a 4096×768×256
// sgemm on one core runs at 197 GFLOP/s with the AVX-512 kernels the library picks itself (Cooperlake) and
// at 100 GFLOP/s with its AVX2 ones (Haswell). Two things can hold a CPU to the narrower kernels:
//  - OPENBLAS_CORETYPE in the environment (read only while the library loads). A user who sets it is
//    obeyed, but blas_info().advice says what it costs (these machines' shells set it to Haswell).
//  - a CPU newer than the library, which it does not recognise. Then, when our library loads, this file
//    asks OpenBLAS to choose again through the two entry points its own start-up uses
//    (gotoblas_dynamic_quit / gotoblas_dynamic_init, exported by every DYNAMIC_ARCH build), with
//    OPENBLAS_CORETYPE=SkylakeX set for that moment only: exactly what setting the variable before start
//    would have done, and nothing has called BLAS yet. A build without those entry points keeps its choice.
// blas_info() tells which happened; `tapegrad bench` prints it.
#include "autograd/blas.h"

#include <cblas.h>

#include <cstdlib>
#include <string>

extern "C" {
// OpenBLAS's dynamic-architecture start-up, declared weak: absent from a single-target build.
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace tapegrad {

namespace {

/// True when the CPU and the OS support the AVX-512 subsets that OpenBLAS's SkylakeX kernels use.
bool avx512_usable() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
}

/// Kernel families of this OpenBLAS that already use AVX-512: nothing to improve on.
bool uses_avx512(const std::string& core) {
  return core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
}

/// Makes the choice described at the top of the file and says how it was made.
std::string choose_kernels() {
  if (const char* forced = std::getenv("OPENBLAS_CORETYPE"); forced && *forced)
    return std::string("OPENBLAS_CORETYPE=") + forced + " (set in the environment)";
  const std::string own = openblas_get_corename();
  if (!avx512_usable() || uses_avx512(own)) return "the library's own choice";
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit)
    return "the library's own choice (this build cannot change kernels; set OPENBLAS_CORETYPE to choose)";
  // SkylakeX is the family that OpenBLAS releases after 0.3.21 choose for AVX-512 CPUs they do not know.
  const char* wanted = "SkylakeX";
  setenv("OPENBLAS_CORETYPE", wanted, 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");  // children of ours choose for themselves
  const std::string now = openblas_get_corename();
  if (now != wanted) return "chosen by tapegrad (" + std::string(wanted) + " was asked for; the library kept " + now + ")";
  return "chosen by tapegrad: the CPU has AVX-512, which the library's own choice (" + own + ") leaves unused";
}

const std::string& kernel_choice() {
  static const std::string how = choose_kernels();
  return how;
}

// Made while the library loads, so that it precedes every BLAS call.
const bool chosen_at_load = !kernel_choice().empty();

}  // namespace

BlasInfo blas_info() {
  (void)chosen_at_load;
  BlasInfo info;
  info.library = openblas_get_config();
  info.kernels = openblas_get_corename();
  info.threads = openblas_get_num_threads();
  info.how_chosen = kernel_choice();
  if (avx512_usable() && !uses_avx512(info.kernels))
    info.advice = "the CPU has AVX-512 but the BLAS runs its " + info.kernels +
                  " kernels (OPENBLAS_CORETYPE?): unset OPENBLAS_CORETYPE for up to 2x faster products";
  return info;
}

void blas_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, lda, b, ldb, beta, c, ldc);
}

void blas_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
               int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, lda, b, ldb, beta, c, ldc);
}

}  // namespace tapegrad
