#pragma once
// softmax and log_softmax, stable (the row max is subtracted), with hand-derived backward rules.
#include "autograd/tensor.h"

namespace tapegrad {

/// exp(x_i - max x) / sum_j exp(x_j - max x) along dim.   x: (..., n) -> (..., n)
/// A row that is entirely -inf (every key masked) gives zeros, not NaN, and passes no gradient.
Tensor softmax(const Tensor& x, int64_t dim = -1);
/// x_i - max x - log sum_j exp(x_j - max x) along dim.   x: (..., n) -> (..., n)
/// A row that is entirely -inf gives -inf (log 0) and passes no gradient.
Tensor log_softmax(const Tensor& x, int64_t dim = -1);
/// The Jacobian of softmax at output p, built explicitly: J = diag(p) - p pᵀ.   p: (n) -> (n, n)
/// For teaching and tests; the backward never builds it.
Tensor softmax_jacobian(const Tensor& p);

}  // namespace tapegrad
