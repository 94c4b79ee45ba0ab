#include "nn/kv_cache.h"

#include "autograd/error.h"
#include "autograd/ops/views.h"
#include "autograd/tape.h"

namespace tapegrad::nn {

KeyValueCache::KeyValueCache(int64_t capacity) : capacity_(capacity) {
  if (capacity < 1) throw ValueError(cat("KeyValueCache: capacity must be >= 1, got ", capacity));
}

void KeyValueCache::append(const Tensor& k, const Tensor& v) {
  if (k.dim() != 4 || !(k.shape() == v.shape()) || k.dtype() != v.dtype())
    throw ShapeError(cat("KeyValueCache: k ", k.shape(), " and v ", v.shape(), " must be (B, H, T, D), one shape and dtype"));
  const int64_t T = k.size(2);
  if (!keys_.defined()) {
    keys_ = zeros({k.size(0), k.size(1), capacity_, k.size(3)}, k.dtype());
    values_ = zeros(keys_.shape(), k.dtype());
  }
  if (k.size(0) != keys_.size(0) || k.size(1) != keys_.size(1) || k.size(3) != keys_.size(3) || k.dtype() != keys_.dtype())
    throw ShapeError(cat("KeyValueCache: k ", k.shape(), " ", dtype_name(k.dtype()), " does not match the cached ",
                         keys_.shape(), " ", dtype_name(keys_.dtype())));
  if (length_ + T > capacity_)
    throw ShapeError(cat("KeyValueCache: ", T, " more positions after ", length_, " pass the capacity ", capacity_));
  NoGradGuard no_grad;
  slice(keys_, 2, length_, length_ + T).copy_(k);
  slice(values_, 2, length_, length_ + T).copy_(v);
  length_ += T;
}

Tensor KeyValueCache::keys() const {
  if (!keys_.defined()) throw ValueError("KeyValueCache: nothing appended yet");
  return slice(keys_, 2, 0, length_);
}

Tensor KeyValueCache::values() const {
  if (!values_.defined()) throw ValueError("KeyValueCache: nothing appended yet");
  return slice(values_, 2, 0, length_);
}

}  // namespace tapegrad::nn
