#pragma once
// Activations: by name for configuration (FeedForward, the CLI), and as modules.
#include <string>

#include "autograd/ops/unary.h"
#include "autograd/tensor.h"
#include "nn/module.h"

namespace tapegrad::nn {

enum class Activation { relu, gelu };

/// "relu" or "gelu"; anything else is a ValueError listing the choices.
Activation parse_activation(const std::string& name);
/// The name parse_activation reads.
const char* activation_name(Activation activation);
/// relu(x) or gelu(x) (exact erf form, as PyTorch's default).   x: any -> same
Tensor activate(const Tensor& x, Activation activation);

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
