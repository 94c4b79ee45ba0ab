#pragma once
// Pooling: how the encoder's output becomes one vector per sequence, the pool components "mean" and "cls".
// Neither has parameters. Letters: B batch, T positions, C = d_model.
#include "autograd/tensor.h"
#include "nn/components.h"

namespace tapegrad::nn {

/// The mean over the non-pad positions (all positions without a mask); an all-pad row pools to zeros.
class MeanPooling : public Pooling {
 public:
  /// key_padding_mask: bool (B, T), true = pad, or undefined.   x: (B, T, C) -> (B, C)
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask) const override;
};

/// The vector of the first position, where the data puts a <cls> token (BERT's pooling).
class ClsPooling : public Pooling {
 public:
  /// x[:, 0]; the mask is not needed.   x: (B, T, C) -> (B, C)
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask) const override;
};

}  // namespace tapegrad::nn
