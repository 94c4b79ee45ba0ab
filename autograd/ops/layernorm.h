#pragma once
// Layer normalisation over the last dim, fused forward and backward.
#include "autograd/tensor.h"

namespace tapegrad {

/// (x - mean) / sqrt(var + eps) ⊙ weight + bias over the last dim, with the biased variance (as PyTorch).
/// weight and bias (C) may be undefined tensors (no affine).   x: (..., C) -> (..., C)
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

}  // namespace tapegrad
