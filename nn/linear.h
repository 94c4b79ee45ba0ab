#pragma once
// Linear: y = x Wᵀ + b over any leading dims, as PyTorch's nn.Linear (same names, shapes, layout and
// default initialisation), so its state moves to and from PyTorch unchanged.
#include <cstdint>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/components.h"
#include "nn/module.h"

namespace tapegrad::nn {

class Linear : public Module {
 public:
  /// weight [out, in] ~ U(-1/√in, 1/√in) (kaiming_uniform, a = √5), then bias [out] ~ U(-1/√in, 1/√in),
  /// both drawn from gen in that order. in and out must be positive.
  Linear(int64_t in_features, int64_t out_features, bool bias, Generator& gen);
  /// A layer whose weight is shared_weight itself, not a copy (weight tying: a language model's head reading
  /// the embedding's [V, C] table, which is Linear's [out, in] layout): out and in are its sizes, it keeps its
  /// values, and it is registered with register_shared_parameter, so a model's state_dict() names it twice
  /// and its named_parameters() once. Only the bias, if any, is drawn from gen. shared_weight must be a 2-D
  /// parameter (a leaf that requires grad) with positive sizes.
  Linear(const Tensor& shared_weight, bool bias, Generator& gen);

  /// y = x Wᵀ + b (Wᵀ is a transposed view of weight, read by BLAS in place).   x: (..., in) -> (..., out)
  Tensor forward(const Tensor& x) const;
  /// activation.apply(forward(x)); an activation with a fused form (relu: the linear_relu op) runs it when
  /// the layer has a bias: the same numbers, without a pass and a buffer for the pre-activation.
  ///   x: (..., in) -> (..., out)
  Tensor forward(const Tensor& x, const ActivationKind::Entry& activation) const;

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

  Tensor weight;  // [out, in]
  Tensor bias;    // [out]; undefined when the layer has no bias

 private:
  void check_input(const Tensor& x) const;  // ShapeError unless x is (..., in)
  int64_t in_features_;
  int64_t out_features_;
};

}  // namespace tapegrad::nn
