#include "rmsnorm.h"

#include <cmath>
#include <memory>
#include <vector>

#include "autograd/ops/views.h"
#include "autograd/registry.h"
#include "autograd/tape.h"
#include "nn/init.h"
#include "nn/module_gradcheck.h"

using namespace tapegrad;

namespace custom {

// rms_norm.   x: (..., C), weight w: (C) -> y: (..., C);  per row of C:
// forward : r = 1/√(mean(x²) + eps),  x̂ = x r,  y = x̂ ⊙ w
// gradient: ∂r/∂x_k = -½ r³ · 2 x_k / C = -r² x̂_k / C,  so
//           ∂x̂_i/∂x_k = r δ_ik + x_i ∂r/∂x_k = r (δ_ik - x̂_i x̂_k / C)      (symmetric)
// backward: with g = dy ⊙ w (the gradient reaching x̂),
//           dx_k = sum_i g_i ∂x̂_i/∂x_k = r (g_k - x̂_k mean(g ⊙ x̂)),  i.e.
//           dx = r · (g - x̂ · mean(g ⊙ x̂))           (LayerNorm's rule without the mean(g) term)
//           dw = sum_rows dy ⊙ x̂
// saves   : x and r per row (x̂ is recomputed from them), w
struct RmsNormNode : NodeOf<RmsNormNode> {
  static constexpr const char* kName = "custom.rms_norm";
  Saved x;       // contiguous (rows, C)
  Saved weight;  // contiguous (C)
  Tensor rstd;   // float64 (rows); private to the node
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    const Tensor& xv = x.get(kName);
    const Tensor& wv = weight.get(kName);
    if (!(dy.shape() == xv.shape()))
      throw AutogradError(cat(kName, " backward: dy ", dy.shape(), " vs x ", xv.shape()));
    const int64_t C = xv.shape().back(), rows = C > 0 ? xv.numel() / C : 0;
    const double* r = rstd.data<double>();
    ctx.add_into(0, [&](auto dx) {
      using T = typename decltype(dx)::value_type;
      const T *xs = xv.data<T>(), *g = dy.data<T>(), *w = wv.data<T>();
      for (int64_t row = 0; row < rows; ++row) {
        const int64_t o = row * C;
        double g_dot_xhat = 0;  // <g, x̂> with g = dy ⊙ w
        for (int64_t k = 0; k < C; ++k) g_dot_xhat += double(g[o + k]) * w[k] * xs[o + k] * r[row];
        const double m = g_dot_xhat / C;
        for (int64_t k = 0; k < C; ++k)
          dx[o + k] += static_cast<T>(r[row] * (double(g[o + k]) * w[k] - xs[o + k] * r[row] * m));
      }
    });
    ctx.add_into(1, [&](auto dw) {
      using T = typename decltype(dw)::value_type;
      const T *xs = xv.data<T>(), *g = dy.data<T>();
      std::vector<double> sum(static_cast<size_t>(C), 0.0);  // over the rows, in double
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t k = 0; k < C; ++k) sum[k] += double(g[row * C + k]) * xs[row * C + k] * r[row];
      for (int64_t k = 0; k < C; ++k) dw[k] += static_cast<T>(sum[k]);
    });
  }
};

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  if (x.dim() == 0) throw ShapeError("rms_norm: x must have at least one dim, got a scalar");
  if (!is_floating(x.dtype()))
    throw DTypeError(cat("rms_norm: x ", x.shape(), " must be float32 or float64, got ", dtype_name(x.dtype())));
  if (weight.dim() != 1 || weight.size(0) != x.size(-1))
    throw ShapeError(cat("rms_norm: weight ", weight.shape(), " does not match the last dim of x ", x.shape()));
  if (weight.dtype() != x.dtype())
    throw DTypeError(cat("rms_norm: weight is ", dtype_name(weight.dtype()), " but x is ", dtype_name(x.dtype())));
  if (!(eps >= 0)) throw ValueError(cat("rms_norm: eps must be >= 0, got ", eps));

  const Tensor xc = x.detach().contiguous(), wc = weight.detach().contiguous();
  const int64_t C = x.size(-1), rows = C > 0 ? x.numel() / C : 0;
  Tensor rstd = empty({rows}, DType::float64);
  Tensor y = empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), "rms_norm", [&](auto tag) {
    using T = decltype(tag);
    const T *xs = xc.data<T>(), *w = wc.data<T>();
    T* ys = y.data<T>();
    double* r = rstd.data<double>();
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t o = row * C;
      double squares = 0;
      for (int64_t k = 0; k < C; ++k) squares += double(xs[o + k]) * xs[o + k];
      r[row] = 1 / std::sqrt(squares / C + eps);
      for (int64_t k = 0; k < C; ++k) ys[o + k] = static_cast<T>(xs[o + k] * r[row] * w[k]);
    }
  });
  if (auto* node = record<RmsNormNode>(y, x, weight)) {
    node->x = xc;
    node->weight = wc;
    node->rstd = rstd;
  }
  return y;
}

RMSNorm::RMSNorm(int64_t dim, double eps) : dim_(dim), eps_(eps) {
  if (dim <= 0) throw ValueError(cat("RMSNorm: dim must be positive, got ", dim));
  weight = register_parameter("weight", ones({dim}));
}

Tensor RMSNorm::forward(const Tensor& x) const {
  const ScopeName scope = enter_scope();
  return rms_norm(x, weight, eps_);
}

namespace {

// One initialiser runs every registration of this file when the library loads.
const bool registered = [] {
  // The op's gradient checks (float64, central differences); the second reads x through a transposed view.
  register_gradchecks({
      op_case("custom/rms_norm/weighted", {{{2, 3, 5}}, {{5}}},
              [](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1], 1e-5); }),
      op_case("custom/rms_norm/of-transposed", {{{5, 4}}, {{5}}},
              [](const std::vector<Tensor>& in) { return rms_norm(transpose(in[0], 0, 1), in[1], 1e-3); }),
  });
  // The layer's: over x and its named parameter, the weight moved off its initial ones first so that a
  // backward ignoring it cannot pass.
  register_gradchecks({nn::module_case<RMSNorm>(
      "custom/rmsnorm/layer",
      [](Generator& gen) {
        auto layer = std::make_unique<RMSNorm>(6, 1e-5);
        nn::uniform_(layer->weight, 0.5, 1.5, gen);
        return layer;
      },
      {{"x", {2, 3, 6}}}, [](const RMSNorm& layer, const std::vector<Tensor>& in) { return layer.forward(in[0]); })});
  // The component: `--norm rmsnorm`, "norm": "rmsnorm" in config.json, with its setting eps: the flag
  // --norm-eps (layernorm declares an eps too, and one flag serves whichever norm is chosen), the key
  // "settings": {"norm": {"eps": ...}} in config.json, its range checked before any work, its line in --help.
  nn::register_component<nn::NormKind>(
      {.name = "rmsnorm",
       .help = "RMSNorm: x / sqrt(mean(x^2) + eps) * weight (no mean, no bias)",
       .make = [](int64_t dim, const nn::VariantSettings& settings, Generator&) -> std::unique_ptr<nn::Norm> {
         return std::make_unique<RMSNorm>(dim, settings.real("eps"));
       },
       .parameter_count = [](int64_t dim, const nn::VariantSettings&) { return dim; },
       .settings = {{.name = "eps",
                     .type = nn::SettingType::real,
                     .default_value = 1e-5,
                     .min = 0,
                     .max = 1,  // a larger eps outweighs mean(x^2): every output tends to 0 whatever the input
                     .min_open = true,
                     .help = "added to mean(x^2) under the square root"}}});
  return true;
}();

}  // namespace

}  // namespace custom
