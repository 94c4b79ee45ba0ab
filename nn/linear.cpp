#include "nn/linear.h"

#include <cmath>

#include "autograd/ops/matmul.h"
#include "autograd/registry.h"
#include "nn/init.h"

namespace tapegrad::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool has_bias, Generator& gen)
    : in_features_(in_features), out_features_(out_features) {
  if (in_features <= 0 || out_features <= 0)
    throw ValueError(
        cat("Linear: in_features and out_features must be positive, got ", in_features, " and ", out_features));
  weight = register_parameter("weight", empty({out_features, in_features}));
  kaiming_uniform_linear_(weight, gen);
  if (has_bias) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    bias = register_parameter("bias", empty({out_features}));
    uniform_(bias, -bound, bound, gen);
  }
}

void Linear::check_input(const Tensor& x) const {
  if (x.dim() == 0 || x.size(-1) != in_features_)
    throw ShapeError(
        cat("Linear: input ", x.shape(), " has last dim ", x.dim() == 0 ? 0 : x.size(-1), ", expected ", in_features_));
}

Tensor Linear::forward(const Tensor& x) const {
  const ScopeName scope = enter_scope();
  check_input(x);
  return linear(x, weight, bias);  // one product that starts from the bias, not a product plus a bias pass
}

Tensor Linear::forward(const Tensor& x, Activation activation) const {
  const ScopeName scope = enter_scope();
  if (activation != Activation::relu || !bias.defined()) return activate(forward(x), activation);
  check_input(x);
  return linear_relu(x, weight, bias);
}

namespace {
// Built from a fixed seed and converted to the check's dtype (float64 by default); checks x and every
// named parameter.
GradcheckCase linear_case(std::string name, int64_t in, int64_t out, bool bias, Shape x_shape) {
  return {std::move(name), [in, out, bias, x_shape](const GradcheckOptions& options) {
            Generator gen(101);
            Linear layer(in, out, bias, gen);
            layer.to(options.dtype);
            std::vector<Tensor> inputs{randn(x_shape, gen, options.dtype).requires_grad_()};
            std::vector<std::string> names{"x"};
            for (const auto& [param_name, param] : layer.named_parameters()) {
              inputs.push_back(param);
              names.push_back(param_name);
            }
            const TensorFn fn = [&layer](const std::vector<Tensor>& in) { return layer.forward(in[0]); };
            return gradcheck(fn, inputs, options, names);
          }};
}

const bool registered = register_gradchecks({
    linear_case("nn/linear/bias", 4, 3, true, {2, 5, 4}),
    linear_case("nn/linear/no-bias", 4, 3, false, {2, 5, 4}),
    linear_case("nn/linear/vector-input", 4, 2, true, {4}),
});
}  // namespace

}  // namespace tapegrad::nn
