#include "nn/layernorm.h"

#include "autograd/ops/layernorm.h"
#include "autograd/registry.h"
#include "nn/init.h"

namespace tapegrad::nn {

LayerNorm::LayerNorm(int64_t dim, double eps) : dim_(dim), eps_(eps) {
  if (dim <= 0) throw ValueError(cat("LayerNorm: dim must be positive, got ", dim));
  if (!(eps >= 0)) throw ValueError(cat("LayerNorm: eps must be >= 0, got ", eps));
  weight = register_parameter("weight", ones({dim}));
  bias = register_parameter("bias", zeros({dim}));
}

Tensor LayerNorm::forward(const Tensor& x) const {
  const ScopeName scope = enter_scope();
  if (x.dim() == 0 || x.size(-1) != dim_)
    throw ShapeError(
        cat("LayerNorm: input ", x.shape(), " has last dim ", x.dim() == 0 ? 0 : x.size(-1), ", expected ", dim_));
  return layer_norm(x, weight, bias, eps_);
}

namespace {
// Converted to the check's dtype (float64 by default); checks x and both parameters. The parameters are
// moved off their initial 1 and 0 first (drawn from a fixed seed), so that a backward that confused
// weight and bias, or ignored the weight, cannot pass.
const bool registered = register_gradchecks({
    {"nn/layernorm/3d",
     [](const GradcheckOptions& options) {
       Generator gen(404);
       LayerNorm layer(5);
       uniform_(layer.weight, 0.5, 1.5, gen);
       normal_(layer.bias, 0, 1, gen);
       layer.to(options.dtype);
       const Tensor x = randn({2, 3, 5}, gen, options.dtype).requires_grad_();
       std::vector<Tensor> inputs{x};
       std::vector<std::string> names{"x"};
       for (const auto& [name, param] : layer.named_parameters()) {
         inputs.push_back(param);
         names.push_back(name);
       }
       const TensorFn fn = [&layer](const std::vector<Tensor>& in) { return layer.forward(in[0]); };
       return gradcheck(fn, inputs, options, names);
     }},
});
}  // namespace

}  // namespace tapegrad::nn
