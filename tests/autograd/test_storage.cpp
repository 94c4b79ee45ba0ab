// The storage cache: large buffers come back for reuse instead of being mapped afresh each step.
#include <catch2/catch.hpp>

#include "autograd/autograd.h"

using namespace tapegrad;

TEST_CASE("storage: a batch shorter than an earlier one reuses its buffers instead of mapping new ones") {
#if defined(__SANITIZE_ADDRESS__)
  WARN("sanitizer build: the storage cache is off, so that AddressSanitizer sees every use after free");
#else
  release_cached_storage();
  const uint64_t before = storage_mappings();
  { const Tensor long_batch = empty({64, 40, 64}, DType::float32); }  // 640 KiB: one new mapping
  CHECK(storage_mappings() == before + 1);
  // Sequence lengths 32..40 ask for up to 20% fewer bytes: the same buffer serves them all.
  for (int64_t length = 40; length >= 32; --length) {
    const Tensor batch = empty({64, length, 64}, DType::float32);
    CHECK(storage_mappings() == before + 1);
  }
  // Two live at once need two buffers; released, both are reused.
  { const Tensor a = empty({64, 40, 64}, DType::float32), b = empty({64, 38, 64}, DType::float32); }
  CHECK(storage_mappings() == before + 2);
  { const Tensor a = empty({64, 39, 64}, DType::float32), b = empty({64, 37, 64}, DType::float32); }
  CHECK(storage_mappings() == before + 2);
  // Half the bytes still takes an idle buffer (a backward's smaller gradients take the forward's larger
  // activations); less than half (after rounding to its size class) gets a buffer of its own.
  { const Tensor half = empty({64, 20, 64}, DType::float32); }
  CHECK(storage_mappings() == before + 2);
  { const Tensor shorter = empty({64, 16, 64}, DType::float32); }
  CHECK(storage_mappings() == before + 3);
  release_cached_storage();
  { const Tensor again = empty({64, 40, 64}, DType::float32); }  // the cache was emptied: mapped afresh
  CHECK(storage_mappings() == before + 4);
#endif
}
