#pragma once
// Losses.
#include "autograd/tensor.h"

namespace tapegrad {

/// Mean over the rows whose target is not ignore_index of -log softmax(logits)[target], fused and stable
/// (log-sum-exp).   logits: (N, C) float, targets: (N) int64 in [0, C) or ignore_index -> ()
/// With every target ignored the loss is 0 (PyTorch gives nan); see docs/autograd.md.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);

}  // namespace tapegrad
