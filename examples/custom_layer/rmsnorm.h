#pragma once
// RMSNorm (Zhang & Sennrich 2019), a layer tapegrad does not ship, added from outside the library the way
// any user adds one: an op with its hand-derived backward (rms_norm), a module (RMSNorm, an nn::Norm) and
// its registration as the norm component "rmsnorm" with its setting eps, all in rmsnorm.cpp. No file of
// tapegrad changes; a program that links rmsnorm.cpp can train, resume, evaluate and predict with
// `--norm rmsnorm --norm-eps 1e-4`.
// Letters: C the normalised (last) dim.
#include <cstdint>

#include "autograd/tensor.h"
#include "nn/components.h"

namespace custom {

/// y = x / √(mean(x²) + eps) ⊙ weight, per row of the last dim.   x: (..., C), weight: (C) -> (..., C)
tapegrad::Tensor rms_norm(const tapegrad::Tensor& x, const tapegrad::Tensor& weight, double eps);

/// RMSNorm over the last dim, as PyTorch's nn.RMSNorm(dim, eps) (PyTorch 2.4 and later): one parameter
/// "weight" [dim], starting at 1, so a checkpoint's state loads there under the same names.
class RMSNorm : public tapegrad::nn::Norm {
 public:
  /// dim must be positive and eps >= 0.
  RMSNorm(int64_t dim, double eps);
  /// rms_norm(x, weight, eps).   x: (..., dim) -> (..., dim)
  tapegrad::Tensor forward(const tapegrad::Tensor& x) const override;
  /// The eps it was built with: its setting "eps" (--norm-eps), 1e-5 unless given.
  double eps() const { return eps_; }

  tapegrad::Tensor weight;  // [dim], starts at 1

 private:
  int64_t dim_;
  double eps_;
};

}  // namespace custom
