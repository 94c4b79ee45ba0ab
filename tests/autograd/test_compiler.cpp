// The compiler bug the build works around (CMakeLists.txt): GCC 12 wrong code, https://gcc.gnu.org/PR108599.
//
// When block moves may be 32 or 64 bytes wide (-march=native on an AVX-512 CPU), GCC turns a copy of constants
// into one 256/512-bit integer constant, then stores it as a broadcast of its lowest 8-byte word whenever the
// words above are copies of it followed by all-zero or all-ones words: GCC leaves such top words implicit, and
// the broadcast check compared only the explicit ones. std::vector<double>{3, 3, 3, 3, 3, 3, 0, 0} came out
// as eight 3s.
//
// Each case below is that construct, inlined here and compiled with the project's flags, so it fails if the
// workaround is dropped while the compiler still has the bug. Keep the braced lists in the test bodies: moved
// into a helper that takes the values as arguments, they would no longer be constants.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {
/// Hides v's storage from the optimiser: whatever the initialiser wrote must be in memory before this point
/// and is read back after it, so the comparison checks the stored bytes, not a constant folded at compile time.
template <class T>
const std::vector<T>& from_memory(const std::vector<T>& v) {
  asm volatile("" : : "r"(v.data()) : "memory");
  return v;
}

/// n copies of value followed by zeros up to size, written one element at a time.
template <class T>
std::vector<T> leading(T value, int n, int size, T rest = 0) {
  std::vector<T> v(size, rest);
  std::fill_n(v.begin(), n, value);
  return from_memory(v);
}
}  // namespace

TEST_CASE("compiler: a constant std::vector of doubles keeps its trailing zeros") {
  // The literal of the original report: 64 bytes, one zmm store.
  const std::vector<double> eight{3, 3, 3, 3, 3, 3, 0, 0};
  CHECK(from_memory(eight) == leading(3.0, 6, 8));
  // 32 bytes, one ymm store: also affected.
  const std::vector<double> four{3, 3, 0, 0};
  CHECK(from_memory(four) == leading(3.0, 2, 4));
  const std::vector<float> sixteen{0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0, 0, 0, 0, 0, 0, 0, 0};
  CHECK(from_memory(sixteen) == leading(0.5f, 8, 16));
}

TEST_CASE("compiler: a constant std::vector of integers keeps its trailing zeros and trailing -1s") {
  const std::vector<int64_t> ids{7, 7, 7, 7, 7, 7, 0, 0};
  CHECK(from_memory(ids) == leading<int64_t>(7, 6, 8));
  // A run of negative words followed by all-ones words: the all-ones words are the implicit ones here.
  const std::vector<int64_t> padded{-2, -2, -1, -1};
  CHECK(from_memory(padded) == leading<int64_t>(-2, 2, 4, -1));
  const std::vector<int32_t> halves{5, 5, 5, 5, 0, 0, 0, 0};
  CHECK(from_memory(halves) == leading<int32_t>(5, 4, 8));
}
