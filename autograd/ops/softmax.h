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

// Row kernels for fused ops (attention), the same arithmetic as softmax's forward and backward.
/// y = softmax(x) of one contiguous row of n; an all -inf row gives zeros. y must not overlap x.
void softmax_row(const float* x, float* y, int64_t n);
void softmax_row(const double* x, double* y, int64_t n);
/// dx = y ⊙ (dy - <dy, y>) on one contiguous row (the softmax Jacobian-vector product); dx may be dy.
void softmax_row_backward(const float* y, const float* dy, float* dx, int64_t n);
void softmax_row_backward(const double* y, const double* dy, double* dx, int64_t n);

}  // namespace tapegrad
