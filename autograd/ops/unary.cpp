// Elementwise math and activations.   x: any -> y: same shape (contiguous)
//
// Every op here is a Rule under its math: its name, what its backward reads, its parameters (elu's α,
// gelu's approximation) and two one-line functions of one element, forward and backward side by side:
//   forward (x)       y
//   backward(dy, v)   dx, where v is the saved y or x (Rule::kSaves)
// One node and one recording function (unary_op) serve them all.
#include "autograd/ops/unary.h"

#include <cmath>
#include <type_traits>

#include "autograd/elementwise_map.h"
#include "autograd/kernels/gelu.h"
#include "autograd/parallel.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

/// What a unary op's backward reads: its output y or its input x.
enum class Saves { y, x };

/// The node of a unary op: dx += rule.backward(dy, v) elementwise, v the saved y or x.
template <class Rule>
struct UnaryNode : NodeOf<UnaryNode<Rule>> {
  static constexpr const char* kName = Rule::kName;
  Saved saved;  // y or x, as Rule::kSaves says
  Rule rule;    // with its parameters
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    add_map2(ctx, 0, dy, saved.get(kName), kName, [r = rule](auto g, auto v) { return r.backward(g, v); });
  }
};

/// y = rule.forward(x) elementwise, recorded with a UnaryNode<Rule>.
template <class Rule>
Tensor unary_op(const Tensor& x, Rule rule = {}) {
  Tensor y = map(x, Rule::kName, [rule](auto v) { return rule.forward(v); });
  if (auto* node = record<UnaryNode<Rule>>(y, x)) {
    node->saved = Rule::kSaves == Saves::y ? y : x;
    node->rule = rule;
  }
  return y;
}

// exp.     y = e^x
// backward: dx = dy ⊙ y
// saves   : y
struct ExpRule {
  static constexpr const char* kName = "exp";
  static constexpr Saves kSaves = Saves::y;
  auto forward(auto x) const { return std::exp(x); }
  auto backward(auto dy, auto y) const { return dy * y; }
};

Tensor exp(const Tensor& x) { return unary_op<ExpRule>(x); }

// log.     y = ln x
// backward: dx = dy / x
// saves   : x
struct LogRule {
  static constexpr const char* kName = "log";
  static constexpr Saves kSaves = Saves::x;
  auto forward(auto x) const { return std::log(x); }
  auto backward(auto dy, auto x) const { return dy / x; }
};

Tensor log(const Tensor& x) { return unary_op<LogRule>(x); }

// sqrt.    y = √x
// backward: dx = dy / (2y)
// saves   : y
struct SqrtRule {
  static constexpr const char* kName = "sqrt";
  static constexpr Saves kSaves = Saves::y;
  auto forward(auto x) const { return std::sqrt(x); }
  auto backward(auto dy, auto y) const { return dy / (y + y); }
};

Tensor sqrt(const Tensor& x) { return unary_op<SqrtRule>(x); }

// tanh.    y = tanh x
// backward: dx = dy ⊙ (1 - y²)
// saves   : y
struct TanhRule {
  static constexpr const char* kName = "tanh";
  static constexpr Saves kSaves = Saves::y;
  auto forward(auto x) const { return std::tanh(x); }
  auto backward(auto dy, auto y) const { return dy * (1 - y * y); }
};

Tensor tanh(const Tensor& x) { return unary_op<TanhRule>(x); }

// sigmoid. y = 1 / (1 + e^-x)
// backward: dx = dy ⊙ y (1 - y)
// saves   : y
struct SigmoidRule {
  static constexpr const char* kName = "sigmoid";
  static constexpr Saves kSaves = Saves::y;
  // Two branches so that e^-x never overflows: for x < 0 use e^x / (1 + e^x).
  template <class T>
  T forward(T x) const {
    if (x >= 0) return T(1) / (T(1) + std::exp(-x));
    const T e = std::exp(x);
    return e / (T(1) + e);
  }
  auto backward(auto dy, auto y) const { return dy * y * (1 - y); }
};

Tensor sigmoid(const Tensor& x) { return unary_op<SigmoidRule>(x); }

// relu.    y = max(x, 0)
// backward: dx = dy ⊙ [y > 0]     (the subgradient at 0 is taken as 0, as PyTorch does)
// saves   : y
struct ReluRule {
  static constexpr const char* kName = "relu";
  static constexpr Saves kSaves = Saves::y;
  auto forward(auto x) const { return x > 0 ? x : decltype(x)(0); }
  auto backward(auto dy, auto y) const { return y > 0 ? dy : decltype(dy)(0); }
};

Tensor relu(const Tensor& x) { return unary_op<ReluRule>(x); }

// elu.    y = x (x > 0),  α(e^x - 1) (x <= 0)
// backward: dy/dx = 1 (x > 0),  α e^x = y + α (x <= 0), so from the output alone:
//           dx = dy ⊙ (x > 0 ? 1 : y + α)     (y > 0 exactly when x > 0, as α(e^x - 1) <= 0)
//           with α = 1 both sides give 1 at x = 0: no kink, which linear attention's φ = elu + 1 relies on
// saves   : y
struct EluRule {
  static constexpr const char* kName = "elu";
  static constexpr Saves kSaves = Saves::y;
  double alpha = 1.0;
  // expm1, not exp - 1: for x near 0⁻ the difference would lose its digits to cancellation.
  template <class T>
  T forward(T x) const { return x > 0 ? x : T(alpha) * std::expm1(x); }
  template <class T>
  T backward(T dy, T y) const { return y > 0 ? dy : dy * (y + T(alpha)); }
};

Tensor elu(const Tensor& x, double alpha) { return unary_op(x, EluRule{.alpha = alpha}); }

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

struct GeluRule {
  static constexpr const char* kName = "gelu";
  static constexpr Saves kSaves = Saves::x;
  GeluApproximation approximation = GeluApproximation::none;
  auto forward(auto x) const { return gelu_value(x, approximation); }
  auto backward(auto dy, auto x) const { return dy * gelu_slope(x, approximation); }
};

// gelu (exact) in float32, contiguous: the same rule through autograd/kernels/gelu.h, a vectorised erfc
// (scalar std::erf was 29% of the language model's step). float64, the gradchecks, stays on GeluRule's
// std::erf. Split across the pool in ranges of kElementsPerRange elements, as the maps are.
struct GeluKernelNode : NodeOf<GeluKernelNode> {
  static constexpr const char* kName = "gelu";
  Saved x;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    const Tensor& xv = x.get(kName);
    if (dy.dtype() != DType::float32 || !dy.is_contiguous() || dy.shape() != xv.shape()) {
      add_map2(ctx, 0, dy, xv, kName, [r = GeluRule{}](auto g, auto v) { return r.backward(g, v); });
      return;
    }
    ctx.add_into(0, [&](auto dx) {
      using T = typename decltype(dx)::value_type;
      if constexpr (std::is_same_v<T, float>) {  // dx has x's dtype: always float here
        const float *pdy = dy.data<float>(), *px = xv.data<float>();
        parallel_for(xv.numel(), kElementsPerRange,
                     [&](int64_t begin, int64_t end) { gelu_backward(pdy + begin, px + begin, dx + begin, end - begin); });
      }
    });
  }
};

Tensor gelu(const Tensor& x, GeluApproximation approximation) {
  if (approximation != GeluApproximation::none || x.dtype() != DType::float32 || !x.is_contiguous())
    return unary_op(x, GeluRule{.approximation = approximation});
  Tensor y = empty(x.shape(), DType::float32);
  const float* px = x.data<float>();
  float* py = y.data<float>();
  parallel_for(x.numel(), kElementsPerRange,
               [&](int64_t begin, int64_t end) { gelu_forward(px + begin, py + begin, end - begin); });
  if (auto* node = record<GeluKernelNode>(y, x)) node->x = x;
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
