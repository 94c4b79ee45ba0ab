#pragma once
// LayerNorm over the last dim, as PyTorch's nn.LayerNorm(dim, eps): parameters "weight" (ones) and "bias"
// (zeros) of shape [dim], on the fused layer_norm op. Registered as the norm component "layernorm".
#include <cstdint>

#include "autograd/tensor.h"
#include "nn/components.h"

namespace tapegrad::nn {

class LayerNorm : public Norm {
 public:
  /// dim must be positive and eps >= 0.
  explicit LayerNorm(int64_t dim, double eps = 1e-5);

  /// (x - mean) / √(var + eps) ⊙ weight + bias per row, biased variance.   x: (..., dim) -> (..., dim)
  Tensor forward(const Tensor& x) const override;

  int64_t dim() const { return dim_; }
  double eps() const { return eps_; }

  Tensor weight;  // [dim], starts at 1
  Tensor bias;    // [dim], starts at 0

 private:
  int64_t dim_;
  double eps_;
};

}  // namespace tapegrad::nn
