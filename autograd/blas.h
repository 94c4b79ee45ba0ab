#pragma once
// The BLAS behind every matrix product, and which of its kernels run.
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

}  // namespace tapegrad
