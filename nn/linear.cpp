#include "nn/linear.h"

#include <cmath>

#include "autograd/ops/matmul.h"
#include "nn/init.h"
#include "nn/module_gradcheck.h"

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

Linear::Linear(const Tensor& shared_weight, bool has_bias, Generator& gen)
    : in_features_(shared_weight.defined() && shared_weight.dim() == 2 ? shared_weight.size(1) : 0),
      out_features_(shared_weight.defined() && shared_weight.dim() == 2 ? shared_weight.size(0) : 0) {
  if (in_features_ <= 0 || out_features_ <= 0)
    throw ShapeError(cat("Linear: a shared weight must be [out, in] with positive sizes, got ",
                         shared_weight.defined() ? cat(shared_weight.shape()) : std::string("an undefined tensor")));
  weight = register_shared_parameter("weight", shared_weight);
  if (has_bias) {  // the other constructor's bias, in the weight's dtype
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features_));
    bias = register_parameter("bias", empty({out_features_}, shared_weight.dtype()));
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

Tensor Linear::forward(const Tensor& x, const ActivationKind::Entry& activation) const {
  const ScopeName scope = enter_scope();
  if (!activation.linear || !bias.defined()) return activation.apply(forward(x));
  check_input(x);
  return activation.linear(x, weight, bias);
}

namespace {
GradcheckCase linear_case(std::string name, int64_t in, int64_t out, bool bias, Shape x_shape) {
  return module_case<Linear>(
      std::move(name), [=](Generator& gen) { return std::make_unique<Linear>(in, out, bias, gen); }, {{"x", x_shape}},
      [](const Linear& layer, const std::vector<Tensor>& x) { return layer.forward(x[0]); }, 101);
}

const bool registered = register_gradchecks({
    linear_case("nn/linear/bias", 4, 3, true, {2, 5, 4}),
    linear_case("nn/linear/no-bias", 4, 3, false, {2, 5, 4}),
    linear_case("nn/linear/vector-input", 4, 2, true, {4}),
});
}  // namespace

}  // namespace tapegrad::nn
