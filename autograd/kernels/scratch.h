#pragma once
// Per-thread workspace for kernels: grown when a call needs more and never shrunk, so that steady-state
// training steps allocate nothing for it.
#include <cstdint>
#include <vector>

namespace tapegrad {

/// A block of at least `count` elements of T for the calling thread, kept between calls. `Tag` (any type,
/// usually a struct declared by the user) tells apart the kernels whose blocks are alive at the same
/// time: a block stays valid until this thread asks again with the same T and Tag.
template <class T, class Tag>
T* scratch(int64_t count) {
  thread_local std::vector<T> block;
  if (static_cast<int64_t>(block.size()) < count) block.resize(static_cast<size_t>(count));
  return block.data();
}

}  // namespace tapegrad
