// The BLAS kernel choice: tapegrad picks AVX-512 kernels where the CPU has them, and obeys OPENBLAS_CORETYPE.
#include <catch2/catch.hpp>

#include <cctype>
#include <cstdlib>
#include <string>

#include "autograd/autograd.h"
#include "autograd/blas.h"

using namespace tapegrad;

namespace {
bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
}
bool lower_equal(std::string a, std::string b) {
  for (auto* s : {&a, &b})
    for (char& c : *s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return a == b;
}
}  // namespace

// ctest runs this case twice: as is, and with OPENBLAS_CORETYPE=Haswell (tests/CMakeLists.txt).
TEST_CASE("blas: AVX-512 kernels on a CPU that has AVX-512, unless OPENBLAS_CORETYPE says otherwise") {
  const BlasInfo info = blas_info();
  INFO("library " << info.library << ", kernels " << info.kernels << ", " << info.how_chosen);
  CHECK(!info.library.empty());
  CHECK(info.threads >= 1);
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  if (forced && *forced) {
    CHECK(lower_equal(info.kernels, forced));
    CHECK(info.how_chosen.rfind("OPENBLAS_CORETYPE=", 0) == 0);
    if (cpu_has_avx512() && lower_equal(forced, "haswell")) CHECK(!info.advice.empty());
  } else if (cpu_has_avx512()) {
    CHECK((info.kernels == "SkylakeX" || info.kernels == "Cooperlake" || info.kernels == "SapphireRapids"));
    CHECK(info.advice.empty());
  }
  // The switched library computes: a product checked by hand.
  CHECK(matmul(tensor({1, 2, 3, 4}, {2, 2}), tensor({5, 6, 7, 8}, {2, 2})).to_vector() ==
        std::vector<double>{19, 22, 43, 50});
}
