#include "nn/activation.h"

namespace tapegrad::nn {

Activation parse_activation(const std::string& name) {
  if (name == "relu") return Activation::relu;
  if (name == "gelu") return Activation::gelu;
  throw ValueError(cat("activation: unknown '", name, "'; choices: relu, gelu"));
}

const char* activation_name(Activation activation) {
  switch (activation) {
    case Activation::relu: return "relu";
    case Activation::gelu: return "gelu";
  }
  return "?";
}

Tensor activate(const Tensor& x, Activation activation) {
  switch (activation) {
    case Activation::relu: return relu(x);
    case Activation::gelu: return gelu(x);
  }
  throw ValueError("activate: invalid Activation value");
}

Tensor ReLU::forward(const Tensor& x) const {
  const ScopeName scope = enter_scope();
  return relu(x);
}

Tensor GELU::forward(const Tensor& x) const {
  const ScopeName scope = enter_scope();
  return gelu(x, approximation_);
}

}  // namespace tapegrad::nn
