// The pool: one free list per size class (multiples of 64 bytes up to 4 KiB), each a chain threaded
// through the idle blocks themselves, behind one mutex (a lock costs tens of nanoseconds, a few hundred
// a step). Idle blocks are never given back: their number is at most the most blocks of a class ever
// live at once, which for training is one step's worth. Sanitizer builds go straight to the system
// allocator, so that AddressSanitizer sees every use after free.
#include "autograd/pool.h"

#include <cstdlib>
#include <mutex>
#include <new>

namespace tapegrad {

namespace {

constexpr size_t kAlign = 64, kPoolLimit = 4096, kClasses = kPoolLimit / kAlign;

size_t class_of(size_t bytes) { return bytes == 0 ? 0 : (bytes - 1) / kAlign; }  // block size (class + 1) · 64

void* system_allocate(size_t bytes) {
  void* p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign + (bytes == 0 ? kAlign : 0));
  if (!p) throw std::bad_alloc();
  return p;
}

#if !defined(__SANITIZE_ADDRESS__)
struct FreeBlock {
  FreeBlock* next;
};

struct Pool {
  std::mutex mutex;
  FreeBlock* free[kClasses] = {};
};

/// Never destroyed: blocks may be released by static objects after every other static is gone.
Pool& pool() {
  static Pool* instance = new Pool;
  return *instance;
}
#endif

}  // namespace

void* pool_allocate(size_t bytes) {
#if !defined(__SANITIZE_ADDRESS__)
  if (bytes <= kPoolLimit) {
    const size_t c = class_of(bytes);
    Pool& p = pool();
    {
      std::lock_guard<std::mutex> lock(p.mutex);
      if (FreeBlock* block = p.free[c]) {
        p.free[c] = block->next;
        return block;
      }
    }
    return system_allocate((c + 1) * kAlign);
  }
#endif
  return system_allocate(bytes);
}

void pool_release(void* block, size_t bytes) noexcept {
  if (!block) return;
#if !defined(__SANITIZE_ADDRESS__)
  if (bytes <= kPoolLimit) {
    Pool& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    auto* free_block = static_cast<FreeBlock*>(block);
    free_block->next = p.free[class_of(bytes)];
    p.free[class_of(bytes)] = free_block;
    return;
  }
#endif
  std::free(block);
}

}  // namespace tapegrad
