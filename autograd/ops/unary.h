#pragma once
// Elementwise math and activations: exp, log, sqrt, tanh, sigmoid, relu, elu, gelu.
#include "autograd/tensor.h"

namespace tapegrad {

/// e^x.                 x: any -> same
Tensor exp(const Tensor& x);
/// ln x (x > 0).        x: any -> same
Tensor log(const Tensor& x);
/// √x (x > 0).          x: any -> same
Tensor sqrt(const Tensor& x);
/// tanh x.              x: any -> same
Tensor tanh(const Tensor& x);
/// 1 / (1 + e^-x).      x: any -> same
Tensor sigmoid(const Tensor& x);
/// max(x, 0).           x: any -> same
Tensor relu(const Tensor& x);
/// x for x > 0, α(e^x - 1) otherwise (PyTorch's F.elu).   x: any -> same
Tensor elu(const Tensor& x, double alpha = 1.0);

/// Which GELU: the exact erf form (PyTorch's default) or the tanh approximation (approximate='tanh').
enum class GeluApproximation { none, tanh };
/// x · Φ(x), fused forward and backward.   x: any -> same
Tensor gelu(const Tensor& x, GeluApproximation approximation = GeluApproximation::none);

}  // namespace tapegrad
