// Inverted dropout: the survivors are scaled up during training so that evaluation is the identity.
#include "autograd/ops/dropout.h"

#include <memory>

#include "autograd/elementwise_map.h"
#include "autograd/random.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

// dropout.   x: any -> y: same shape;  p = drop probability in [0, 1), s = 1/(1 - p)
// forward : keep_i = [u_i >= p],  u_i = gen.uniform(), one draw per element in row-major order
//           y = x ⊙ keep · s                    (E[y] = x, so evaluation needs no rescaling)
// backward: dx = dy ⊙ keep · s                  (y is linear in x with the mask fixed)
// saves   : the keep mask (bool) and s
struct DropoutNode : NodeOf<DropoutNode> {
  static constexpr const char* kName = "dropout";
  Saved keep;  // bool, contiguous, x's shape
  double scale = 1;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    if (!ctx.needs_grad(0)) return;
    const Tensor& mask = keep.get(kName);
    if (!(dy.shape() == mask.shape()))
      throw AutogradError(cat(kName, " backward: dy ", dy.shape(), " vs mask ", mask.shape()));
    const bool* k = mask.data<bool>();
    ctx.add_into(0, [&](auto dx) {
      using T = typename decltype(dx)::value_type;
      const T* g = dy.data<T>();
      const T s = static_cast<T>(scale);
      for (int64_t i = 0, n = dy.numel(); i < n; ++i) dx[i] += k[i] ? g[i] * s : T(0);
    });
  }
};

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  if (!(p >= 0 && p < 1)) throw ValueError(cat("dropout: p must be in [0, 1), got ", p, " (x ", x.shape(), ")"));
  if (!is_floating(x.dtype()))
    throw DTypeError(cat("dropout: x ", x.shape(), " must be float32 or float64, got ", dtype_name(x.dtype())));
  if (!training || p == 0) return x;  // the same tensor: no copy, no draw, nothing recorded

  const int64_t n = x.numel();
  Tensor keep = empty(x.shape(), DType::boolean);
  bool* k = keep.data<bool>();
  for (int64_t i = 0; i < n; ++i) k[i] = gen.uniform() >= p;

  const double scale = 1.0 / (1.0 - p);
  const Tensor xc = x.detach().contiguous();
  Tensor y = empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T* in = xc.data<T>();
    T* out = y.data<T>();
    const T s = static_cast<T>(scale);
    for (int64_t i = 0; i < n; ++i) out[i] = k[i] ? in[i] * s : T(0);
  });
  if (auto* node = record<DropoutNode>(y, x)) {
    node->keep = keep;
    node->scale = scale;
  }
  return y;
}

namespace {
// The mask must be the same on every evaluation of the gradcheck, so the function reseeds its own
// generator on each call. With seed 7 both cases below keep some elements and drop others (p = 0.4 keeps
// 15 of 24; p = 0.9 keeps 3 of 15), so neither is a trivially zero gradient.
GradcheckCase dropout_case(std::string name, Shape shape, double p) {
  return {std::move(name), [shape, p](const GradcheckOptions& options) {
            Generator inputs_gen(options.seed);
            const std::vector<Tensor> inputs = make_inputs({{shape}}, inputs_gen, options.dtype);
            auto gen = std::make_shared<Generator>();
            const TensorFn fn = [gen, p](const std::vector<Tensor>& in) {
              gen->reseed(7);
              return dropout(in[0], p, /*training=*/true, *gen);
            };
            return gradcheck(fn, inputs, options);
          }};
}

const bool registered = register_gradchecks({
    dropout_case("dropout/p0.4", {4, 6}, 0.4),
    dropout_case("dropout/p0.9", {3, 5}, 0.9),
});
}  // namespace

}  // namespace tapegrad
