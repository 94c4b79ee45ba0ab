#pragma once
// The keys and values one attention layer has computed, kept while a language model generates one token at a
// time, so that a new token costs one row of projections and one row of attention, O(T·C), instead of the
// whole prefix again (seed 003 §5). Inference only: nothing here is recorded on the tape.
// Letters: B batch, H heads, D = C / H per head.
#include <cstdint>

#include "autograd/tensor.h"

namespace tapegrad::nn {

class KeyValueCache {
 public:
  /// Room for `capacity` positions; the buffers are made at the first append, in its dtype and shape.
  explicit KeyValueCache(int64_t capacity);

  /// k and v of positions [length(), length() + T) appended: a ShapeError naming the shapes when they differ
  /// from each other or from what the cache holds, or when the cache would pass its capacity.
  ///   k, v: (B, H, T, D)
  void append(const Tensor& k, const Tensor& v);
  /// Every position kept, as views of the buffers (valid until the next append or clear).   -> (B, H, length, D)
  Tensor keys() const;
  Tensor values() const;

  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  /// Forgets every position, keeping the buffers.
  void clear() { length_ = 0; }

 private:
  int64_t capacity_, length_ = 0;
  Tensor keys_, values_;  // (B, H, capacity, D), or undefined before the first append
};

}  // namespace tapegrad::nn
