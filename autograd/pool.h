#pragma once
// Small blocks recycled instead of handed back to the system allocator. A training step creates and
// drops the same small objects every step (tensor headers, storages of a few numbers, autograd state,
// tape entries and their edges: about 400 per step of the small benchmark model), so after the first
// step every request is met from blocks the previous step released, and steady-state steps call
// malloc not at all (`tapegrad bench` counts it).
#include <cstddef>
#include <memory>
#include <utility>

namespace tapegrad {

/// A 64-byte aligned block of at least `bytes` (any size; above kPoolLimit it comes from the system).
void* pool_allocate(size_t bytes);
/// Returns a block from pool_allocate(bytes) with the same `bytes`.
void pool_release(void* block, size_t bytes) noexcept;

/// std::allocator's interface over the pool, for allocate_shared and containers.
template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(pool_allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { pool_release(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const { return true; }
};

/// std::make_shared with the object and its control block in one pooled block.
template <class T, class... Args>
std::shared_ptr<T> make_pooled(Args&&... args) {
  return std::allocate_shared<T>(PoolAllocator<T>{}, std::forward<Args>(args)...);
}

}  // namespace tapegrad
