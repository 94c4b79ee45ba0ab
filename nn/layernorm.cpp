#include "nn/layernorm.h"

#include "autograd/ops/layernorm.h"
#include "nn/init.h"
#include "nn/module_gradcheck.h"

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

// Moved off its initial 1 and 0 first (drawn from the fixed seed), so that a backward that confused weight
// and bias, or ignored the weight, cannot pass; checks x and both parameters.
std::unique_ptr<LayerNorm> off_initial(int64_t dim, Generator& gen) {
  auto layer = std::make_unique<LayerNorm>(dim);
  uniform_(layer->weight, 0.5, 1.5, gen);
  normal_(layer->bias, 0, 1, gen);
  return layer;
}

// One initialiser runs every registration of this file when the library loads.
const bool registered = [] {
  register_component<NormKind>(
      {.name = "layernorm",
       .help = "LayerNorm: (x - mean) / sqrt(var + eps) * weight + bias",
       .make = [](int64_t dim, const VariantSettings& settings, Generator&) -> std::unique_ptr<Norm> {
         return std::make_unique<LayerNorm>(dim, settings.real("eps"));
       },
       .parameter_count = [](int64_t dim, const VariantSettings&) { return 2 * dim; },
       // PyTorch's layer_norm_eps; --norm-eps, shared with any other norm that declares an eps.
       .settings = {{.name = "eps",
                     .type = SettingType::real,
                     .default_value = 1e-5,
                     // At most 1: past it the eps outweighs the variance of a normalised row, the norm stops
                     // normalising, and at 1e30 every output is its bias whatever the input.
                     .min = 0,
                     .max = 1,
                     .min_open = true,
                     .help = "added to the variance under the square root",
                     .flag = "--norm-eps",
                     .old_key = "layer_norm_eps"}}});
  register_gradchecks({module_case<LayerNorm>(
      "nn/layernorm/3d", [](Generator& gen) { return off_initial(5, gen); }, {{"x", {2, 3, 5}}},
      [](const LayerNorm& layer, const std::vector<Tensor>& in) { return layer.forward(in[0]); }, 404)});
  return true;
}();

}  // namespace

}  // namespace tapegrad::nn
