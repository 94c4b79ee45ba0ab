// Counts the tapegrad executable's calls into the system allocator, for `tapegrad bench`'s heap
// allocations per step. Every malloc-family call of the process (the libraries' included: ELF symbol
// interposition) comes here first, is counted, and goes on to glibc's allocator unchanged. Frees are not
// counted. Left out of sanitizer builds, whose runtime interposes the allocator itself.
#if !defined(__SANITIZE_ADDRESS__)
#include <atomic>
#include <cstddef>
#include <cstdint>

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);

namespace {
std::atomic<uint64_t> heap_allocations{0};
void count() { heap_allocations.fetch_add(1, std::memory_order_relaxed); }
}  // namespace

uint64_t tapegrad_heap_allocations() { return heap_allocations.load(std::memory_order_relaxed); }

void* malloc(size_t size) {
  count();
  return __libc_malloc(size);
}
void* calloc(size_t count_, size_t size) {
  count();
  return __libc_calloc(count_, size);
}
void* realloc(void* p, size_t size) {
  count();
  return __libc_realloc(p, size);
}
void* memalign(size_t alignment, size_t size) {
  count();
  return __libc_memalign(alignment, size);
}
void* aligned_alloc(size_t alignment, size_t size) {
  count();
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, size_t alignment, size_t size) {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) return 22;  // EINVAL
  count();
  void* p = __libc_memalign(alignment, size);
  if (!p && size) return 12;  // ENOMEM
  *out = p;
  return 0;
}
}
#endif
