// Elementwise math and activations.   x: any -> y: same shape (contiguous)
#include "autograd/ops/unary.h"

#include <cmath>

#include "autograd/kernels.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

// exp.     y = e^x
// backward: dx = dy ⊙ y
// saves   : y
struct ExpNode : NodeOf<ExpNode> {
  static constexpr const char* kName = "exp";
  Saved y;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    const Tensor& yv = y.get(kName);
    add_map2(ctx, 0, dy, yv, kName, [](auto g, auto v) { return g * v; });
  }
};

Tensor exp(const Tensor& x) {
  Tensor y = map(x, "exp", [](auto v) { return std::exp(v); });
  if (auto* node = record<ExpNode>(y, x)) node->y = y;
  return y;
}

// log.     y = ln x
// backward: dx = dy / x
// saves   : x
struct LogNode : NodeOf<LogNode> {
  static constexpr const char* kName = "log";
  Saved x;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    const Tensor& xv = x.get(kName);
    add_map2(ctx, 0, dy, xv, kName, [](auto g, auto v) { return g / v; });
  }
};

Tensor log(const Tensor& x) {
  Tensor y = map(x, "log", [](auto v) { return std::log(v); });
  if (auto* node = record<LogNode>(y, x)) node->x = x;
  return y;
}

// sqrt.    y = √x
// backward: dx = dy / (2y)
// saves   : y
struct SqrtNode : NodeOf<SqrtNode> {
  static constexpr const char* kName = "sqrt";
  Saved y;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    const Tensor& yv = y.get(kName);
    add_map2(ctx, 0, dy, yv, kName, [](auto g, auto v) { return g / (v + v); });
  }
};

Tensor sqrt(const Tensor& x) {
  Tensor y = map(x, "sqrt", [](auto v) { return std::sqrt(v); });
  if (auto* node = record<SqrtNode>(y, x)) node->y = y;
  return y;
}

// tanh.    y = tanh x
// backward: dx = dy ⊙ (1 - y²)
// saves   : y
struct TanhNode : NodeOf<TanhNode> {
  static constexpr const char* kName = "tanh";
  Saved y;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    const Tensor& yv = y.get(kName);
    add_map2(ctx, 0, dy, yv, kName, [](auto g, auto v) { return g * (1 - v * v); });
  }
};

Tensor tanh(const Tensor& x) {
  Tensor y = map(x, "tanh", [](auto v) { return std::tanh(v); });
  if (auto* node = record<TanhNode>(y, x)) node->y = y;
  return y;
}

// sigmoid. y = 1 / (1 + e^-x)
// backward: dx = dy ⊙ y (1 - y)
// saves   : y
struct SigmoidNode : NodeOf<SigmoidNode> {
  static constexpr const char* kName = "sigmoid";
  Saved y;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    const Tensor& yv = y.get(kName);
    add_map2(ctx, 0, dy, yv, kName, [](auto g, auto v) { return g * v * (1 - v); });
  }
};

Tensor sigmoid(const Tensor& x) {
  // Two branches so that e^-x never overflows: for x < 0 use e^x / (1 + e^x).
  Tensor y = map(x, "sigmoid", [](auto v) {
    using T = decltype(v);
    if (v >= 0) return T(1) / (T(1) + std::exp(-v));
    const T e = std::exp(v);
    return e / (T(1) + e);
  });
  if (auto* node = record<SigmoidNode>(y, x)) node->y = y;
  return y;
}

// relu.    y = max(x, 0)
// backward: dx = dy ⊙ [y > 0]     (the subgradient at 0 is taken as 0, as PyTorch does)
// saves   : y
struct ReluNode : NodeOf<ReluNode> {
  static constexpr const char* kName = "relu";
  Saved y;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    const Tensor& yv = y.get(kName);
    add_map2(ctx, 0, dy, yv, kName, [](auto g, auto v) { return v > 0 ? g : decltype(g)(0); });
  }
};

Tensor relu(const Tensor& x) {
  Tensor y = map(x, "relu", [](auto v) { return v > 0 ? v : decltype(v)(0); });
  if (auto* node = record<ReluNode>(y, x)) node->y = y;
  return y;
}

// elu.    y = x (x > 0),  α(e^x - 1) (x <= 0)
// backward: dy/dx = 1 (x > 0),  α e^x = y + α (x <= 0), so from the output alone:
//           dx = dy ⊙ (x > 0 ? 1 : y + α)     (y > 0 exactly when x > 0, as α(e^x - 1) <= 0)
//           with α = 1 both sides give 1 at x = 0: no kink, which linear attention's φ = elu + 1 relies on
// saves   : y
struct EluNode : NodeOf<EluNode> {
  static constexpr const char* kName = "elu";
  Saved y;
  double alpha = 1.0;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    const Tensor& yv = y.get(kName);
    add_map2(ctx, 0, dy, yv, kName, [a = alpha](auto g, auto v) {
      using T = decltype(v);
      return v > 0 ? g : g * (v + T(a));
    });
  }
};

Tensor elu(const Tensor& x, double alpha) {
  // expm1, not exp - 1: for x near 0⁻ the difference would lose its digits to cancellation.
  Tensor y = map(x, "elu", [alpha](auto v) {
    using T = decltype(v);
    return v > 0 ? v : T(alpha) * std::expm1(v);
  });
  if (auto* node = record<EluNode>(y, x)) {
    node->y = y;
    node->alpha = alpha;
  }
  return y;
}

// gelu (exact).   y = x Φ(x),  Φ(x) = ½(1 + erf(x/√2)),  φ(x) = e^{-x²/2} / √(2π)
// backward: dx = dy ⊙ (Φ(x) + x φ(x))
// gelu (tanh).    y = ½x(1 + t),  t = tanh(u),  u = √(2/π)(x + 0.044715x³)
// backward: dx = dy ⊙ (½(1 + t) + ½x(1 - t²) √(2/π)(1 + 3·0.044715x²))
// saves   : x
namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654, kInvSqrt2 = 0.7071067811865476,
                 kInvSqrt2Pi = 0.3989422804014327, kGeluCubic = 0.044715;

template <class T>
T gelu_value(T x, GeluApproximation approximation) {
  if (approximation == GeluApproximation::tanh)
    return T(0.5) * x * (T(1) + std::tanh(T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x)));
  return T(0.5) * x * (T(1) + std::erf(x * T(kInvSqrt2)));
}

template <class T>
T gelu_slope(T x, GeluApproximation approximation) {
  if (approximation == GeluApproximation::tanh) {
    const T t = std::tanh(T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x));
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
  }
  const T cdf = T(0.5) * (T(1) + std::erf(x * T(kInvSqrt2)));
  const T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * x * x);
  return cdf + x * pdf;
}
}  // namespace

struct GeluNode : NodeOf<GeluNode> {
  static constexpr const char* kName = "gelu";
  Saved x;
  GeluApproximation approximation = GeluApproximation::none;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    const Tensor& xv = x.get(kName);
    add_map2(ctx, 0, dy, xv, kName, [a = approximation](auto g, auto v) { return g * gelu_slope(v, a); });
  }
};

Tensor gelu(const Tensor& x, GeluApproximation approximation) {
  Tensor y = map(x, "gelu", [approximation](auto v) { return gelu_value(v, approximation); });
  if (auto* node = record<GeluNode>(y, x)) {
    node->x = x;
    node->approximation = approximation;
  }
  return y;
}

namespace {
using K = InputSpec::Kind;
const bool registered = register_gradchecks({
    op_case("unary/exp", {{{3, 4}}}, [](auto& in) { return exp(in[0]); }),
    op_case("unary/log", {{{3, 4}, K::positive}}, [](auto& in) { return log(in[0]); }),
    op_case("unary/sqrt", {{{3, 4}, K::positive}}, [](auto& in) { return sqrt(in[0]); }),
    op_case("unary/tanh", {{{3, 4}}}, [](auto& in) { return tanh(in[0]); }),
    op_case("unary/sigmoid", {{{3, 4}}}, [](auto& in) { return sigmoid(in[0]); }),
    op_case("unary/relu", {{{3, 4}, K::apart}}, [](auto& in) { return relu(in[0]); }),
    op_case("unary/elu", {{{3, 4}}}, [](auto& in) { return elu(in[0]); }),
    // α != 1 has a kink at 0 (slopes 1 and α): inputs kept apart from it.
    op_case("unary/elu/alpha-0.5", {{{3, 4}, K::apart}}, [](auto& in) { return elu(in[0], 0.5); }),
    op_case("unary/gelu/erf", {{{3, 4}}}, [](auto& in) { return gelu(in[0]); }),
    op_case("unary/gelu/tanh", {{{3, 4}}}, [](auto& in) { return gelu(in[0], GeluApproximation::tanh); }),
});
}  // namespace

}  // namespace tapegrad
