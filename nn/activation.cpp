#include "nn/activation.h"

#include "autograd/ops/matmul.h"
#include "nn/components.h"

namespace tapegrad::nn {

Tensor activate(const Tensor& x, const std::string& name) { return component<ActivationKind>(name).apply(x); }

Tensor ReLU::forward(const Tensor& x) const {
  const ScopeName scope = enter_scope();
  return relu(x);
}

Tensor GELU::forward(const Tensor& x) const {
  const ScopeName scope = enter_scope();
  return gelu(x, approximation_);
}

namespace {

// One initialiser runs every registration of this file when the library loads.
const bool registered = [] {
  register_component<ActivationKind>(
      {.name = "relu",
       .help = "max(x, 0)",
       .apply = [](const Tensor& x) { return relu(x); },
       // the bias and the max folded into the product's output pass
       .linear = [](const Tensor& x, const Tensor& w, const Tensor& b) { return linear_relu(x, w, b); }});
  register_component<ActivationKind>({.name = "gelu",
                                      .help = "x·Φ(x), exact erf form (PyTorch's default)",
                                      .apply = [](const Tensor& x) { return gelu(x); }});
  return true;
}();

}  // namespace

}  // namespace tapegrad::nn
