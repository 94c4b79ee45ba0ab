#pragma once
// Matrix products on CBLAS sgemm/dgemm.
#include "autograd/tensor.h"

namespace tapegrad {

/// a @ b, as torch.matmul: 2-D, or batched (..., M, K) @ (..., K, N) -> (..., M, N) with broadcast batch
/// dims; a 1-D operand is a vector (a row for a, a column for b) and its dim is dropped from the result.
/// Transposed or row-strided operands go to BLAS as transpose flags and leading dims, never copied.
Tensor matmul(const Tensor& a, const Tensor& b);

/// x Wᵀ + b, as torch.nn.functional.linear: one product over all of x's rows that starts from the bias,
/// instead of a product and then a pass adding the bias. Without a bias it is matmul(x, Wᵀ).
///   x: (..., K), weight: (N, K), bias: (N) or undefined -> (..., N)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

/// relu(linear(x, weight, bias)) in one op: relu is applied to the product's output in place, so the
/// pre-activation never takes a buffer and a pass of its own.   shapes as linear
Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias);

}  // namespace tapegrad
