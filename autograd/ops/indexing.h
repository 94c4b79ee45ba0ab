#pragma once
// Indexing: embedding lookup, masked_fill, where.
#include "autograd/tensor.h"

namespace tapegrad {

/// Rows of weight by id.   weight: (V, C), ids: int64 (...) -> (..., C)
/// The gradient scatter-adds into the rows used; the row padding_idx (if >= 0) gets none.
Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx = -1);
/// x with value wherever mask is true.   x: any, mask: bool broadcastable to x -> x's shape
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
/// a where condition is true, else b.    condition: bool, a, b: all broadcastable -> broadcast shape
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);

}  // namespace tapegrad
