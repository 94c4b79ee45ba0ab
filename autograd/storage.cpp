// Storage: the bytes behind tensors. Small buffers are pool blocks (autograd/pool.h), large ones come
// through a cache of mappings.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <map>
#include <vector>

#include "autograd/pool.h"
#include "autograd/tensor.h"

namespace tapegrad {

// Training asks for the same buffer sizes every step: step N+1 allocates exactly what step N freed. So a
// buffer of at least kCachedBytes is not returned to the system when its storage dies but kept in a free
// list for its size (rounded up to a size class, below), and the next request of that size takes it back: no
// fresh pages to fault in and zero, and no heap fragmentation (glibc's heap, with large short-lived
// buffers among small long-lived objects, held about twice the live bytes). Large buffers are their own
// mappings, so a buffer that leaves the cache goes straight back to the system.
//
// Bound: idle bytes stay at most twice the most bytes ever live at once (a step's buffers need about
// 1.2 times that when sizes repeat); beyond it the least recently freed buffers are unmapped, so buffers
// of shapes no longer used (another sequence length, say) do not accumulate. release_cached_storage()
// drops every idle buffer.
//
// Storages die on whatever thread drops the last reference, so the lists sit behind a mutex: one lock
// per large allocation, which is noise next to writing the buffer.
//
// Sanitizer builds (and TAPEGRAD_STORAGE_CACHE=0) bypass the cache, so that AddressSanitizer sees every
// use after free.
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kCachedBytes = kPage;  // smaller buffers are pool blocks

bool cache_enabled() {
#if defined(__SANITIZE_ADDRESS__)
  return false;
#else
  static const bool enabled = [] {
    const char* env = std::getenv("TAPEGRAD_STORAGE_CACHE");
    return !(env && std::strcmp(env, "0") == 0);
  }();
  return enabled;
#endif
}

std::atomic<uint64_t> new_mappings{0};
std::atomic<uint64_t> live_tensor_bytes{0}, peak_tensor_bytes{0};

void count_live_bytes(size_t bytes) {
  const uint64_t live = live_tensor_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  uint64_t peak = peak_tensor_bytes.load(std::memory_order_relaxed);
  while (live > peak && !peak_tensor_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

class StorageCache {
 public:
  /// A page-aligned buffer of at least `bytes` (a size class): the most recently freed idle one of the
  /// smallest class there is up to twice as large, else a new mapping. Sets *capacity to its size.
  void* allocate(size_t bytes, size_t* capacity) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = idle_.lower_bound(bytes); it != idle_.end() && it->first <= 2 * bytes; ++it) {
        if (it->second.empty()) continue;
        void* p = it->second.back().data;
        it->second.pop_back();
        *capacity = it->first;
        idle_bytes_ -= it->first;
        live_ += it->first;
        peak_live_ = std::max(peak_live_, live_);
        return p;
      }
      live_ += bytes;
      peak_live_ = std::max(peak_live_, live_);
    }
    *capacity = bytes;
    void* p = map(bytes);
    if (!p) {  // out of address space or memory: give back what sits idle, then try once more
      release_idle();
      p = map(bytes);
    }
    if (!p) {
      std::lock_guard<std::mutex> lock(mutex_);
      live_ -= bytes;
      throw Error(cat("out of memory allocating ", bytes, " bytes"));
    }
    return p;
  }

  /// Takes back a buffer from allocate(bytes), keeping it for reuse within the bound.
  void release(void* p, size_t bytes) {
    std::vector<Idle> evicted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_ -= bytes;
      idle_[bytes].push_back({p, ++clock_});
      idle_bytes_ += bytes;
      while (idle_bytes_ > 2 * peak_live_) evicted.push_back(take_oldest());
    }
    for (const Idle& idle : evicted) ::munmap(idle.data, idle.bytes);
  }

  void release_idle() {
    std::vector<Idle> evicted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (idle_bytes_ > 0) evicted.push_back(take_oldest());
    }
    for (const Idle& idle : evicted) ::munmap(idle.data, idle.bytes);
  }

 private:
  struct Idle {
    void* data;
    uint64_t freed_at;  // clock_ when it was released: smaller is older
    size_t bytes = 0;
  };

  static void* map(size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    new_mappings.fetch_add(1, std::memory_order_relaxed);
    return p;
  }

  /// Removes the least recently freed idle buffer (idle_bytes_ > 0; mutex held). Each list is in release
  /// order, so the oldest is the front of one of them; there are only as many lists as buffer sizes.
  Idle take_oldest() {
    auto oldest = idle_.end();
    for (auto it = idle_.begin(); it != idle_.end(); ++it)
      if (!it->second.empty() && (oldest == idle_.end() || it->second.front().freed_at < oldest->second.front().freed_at))
        oldest = it;
    Idle idle = oldest->second.front();
    idle.bytes = oldest->first;
    oldest->second.erase(oldest->second.begin());
    idle_bytes_ -= idle.bytes;
    return idle;
  }

  std::mutex mutex_;
  std::map<size_t, std::vector<Idle>> idle_;  // by size; each in release order (back = newest)
  size_t live_ = 0, peak_live_ = 0, idle_bytes_ = 0;
  uint64_t clock_ = 0;
};

/// Never destroyed: storages held by static objects may die after every other static.
StorageCache& storage_cache() {
  static StorageCache* cache = new StorageCache;
  return *cache;
}

/// The size a buffer of `bytes` is mapped at, and whether it goes through the cache. Sizes round up to
/// one of eight steps per power of two (at most 12.5% more, and whole pages), and a request may take an
/// idle buffer up to twice as large as its class. Batches whose sequence length changes from step to step
/// then reuse the buffers of earlier, longer batches instead of mapping fresh ones; and a step's backward,
/// which asks for other sizes than its forward freed (a layer's 12 MiB q|k|v gradient where the forward
/// freed 16 MiB hidden activations, parameter gradients), takes the idle buffers instead of mapping more
/// beside them. Up to a quarter larger, as before, the long model's training run peaked at 147 MiB
/// resident for 104 MiB of tensors; up to twice, at 134 (medium's: 303 -> 291 MiB).
size_t cached_size(size_t bytes) {
  const size_t step = std::max(kPage, std::bit_floor(bytes) / 8);
  return (bytes + step - 1) / step * step;
}
bool use_cache(size_t bytes) { return bytes >= kCachedBytes && cache_enabled(); }

}  // namespace

Storage::Storage(size_t nbytes) : bytes(nbytes), capacity(nbytes) {
  if (use_cache(nbytes))
    data = storage_cache().allocate(cached_size(nbytes), &capacity);  // page-aligned
  else  // small buffers are recycled blocks of the pool (autograd/pool.h), 64-byte aligned for AVX-512 loads
    data = nbytes ? pool_allocate(nbytes) : nullptr;
  count_live_bytes(nbytes);  // once the allocation, which may throw, has succeeded
}

Storage::~Storage() {
  live_tensor_bytes.fetch_sub(bytes, std::memory_order_relaxed);
  if (use_cache(bytes))
    storage_cache().release(data, capacity);
  else
    pool_release(data, bytes);
}

uint64_t storage_mappings() { return new_mappings.load(std::memory_order_relaxed); }

TensorBytes tensor_bytes() {
  return {live_tensor_bytes.load(std::memory_order_relaxed), peak_tensor_bytes.load(std::memory_order_relaxed)};
}

void reset_peak_tensor_bytes() { peak_tensor_bytes.store(live_tensor_bytes.load(std::memory_order_relaxed)); }

void release_cached_storage() {
  if (cache_enabled()) storage_cache().release_idle();
}

}  // namespace tapegrad
