#pragma once
// Activations: registered by name as components (nn/components.h: "relu", "gelu") for the feed-forward
// block and the command line, and as modules.
#include <string>

#include "autograd/ops/unary.h"
#include "autograd/tensor.h"
#include "nn/module.h"

namespace tapegrad::nn {

/// The registered activation `name` applied to x (a ValueError naming the choices for an unknown name).
///   x: any -> same
Tensor activate(const Tensor& x, const std::string& name);

/// max(x, 0), as PyTorch's nn.ReLU; no parameters.
class ReLU : public Module {
 public:
  /// max(x, 0) elementwise.   x: any -> same
  Tensor forward(const Tensor& x) const;
};

/// x · Φ(x), as PyTorch's nn.GELU(approximate="none" | "tanh"); no parameters.
class GELU : public Module {
 public:
  explicit GELU(GeluApproximation approximation = GeluApproximation::none) : approximation_(approximation) {}
  /// x · Φ(x) elementwise (or its tanh approximation).   x: any -> same
  Tensor forward(const Tensor& x) const;
  GeluApproximation approximation() const { return approximation_; }

 private:
  GeluApproximation approximation_;
};

}  // namespace tapegrad::nn
