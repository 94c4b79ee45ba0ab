// Elementwise arithmetic. Shapes: a, b broadcast to out; each backward sums over the dims that
// broadcasting expanded (add_map2 does that when the gradient buffer is smaller than out).
#include "autograd/ops/elementwise.h"

#include <cmath>

#include "autograd/elementwise_map.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

// add.     a, b -> out = a + b
// backward: da = sum_broadcast(dout), db = sum_broadcast(dout)
struct AddNode : NodeOf<AddNode> {
  static constexpr const char* kName = "add";
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    ctx.accumulate(0, dout);
    ctx.pass_through(1, dout);  // b may take dout's own buffer
  }
};

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = map2(a, b, "add", [](auto x, auto y) { return x + y; });
  record<AddNode>(out, a, b);
  return out;
}

// sub.     a, b -> out = a - b
// backward: da = sum_broadcast(dout), db = -sum_broadcast(dout)
struct SubNode : NodeOf<SubNode> {
  static constexpr const char* kName = "sub";
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    ctx.accumulate(1, dout, -1);
    ctx.pass_through(0, dout);  // a may take dout's own buffer
  }
};

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = map2(a, b, "sub", [](auto x, auto y) { return x - y; });
  record<SubNode>(out, a, b);
  return out;
}

// mul.     a, b -> out = a ⊙ b
// backward: da = sum_broadcast(dout ⊙ b), db = sum_broadcast(dout ⊙ a)
// saves   : a, b (each only when the other needs a gradient)
struct MulNode : NodeOf<MulNode> {
  static constexpr const char* kName = "mul";
  Saved a, b;
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    auto times = [](auto g, auto y) { return g * y; };
    const Tensor &bv = b.get(kName), &av = a.get(kName);  // each undefined when not saved
    add_map2(ctx, 0, dout, bv, kName, times);
    add_map2(ctx, 1, dout, av, kName, times);
  }
};

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = map2(a, b, "mul", [](auto x, auto y) { return x * y; });
  if (auto* node = record<MulNode>(out, a, b)) {
    if (node->inputs[0].meta) node->b = b;
    if (node->inputs[1].meta) node->a = a;
  }
  return out;
}

// div.     a, b -> out = a / b
// backward: da = sum_broadcast(dout / b)
//           db = sum_broadcast(-dout ⊙ a / b²) = sum_broadcast(-dout ⊙ out / b)
// saves   : b, and out when b needs a gradient
struct DivNode : NodeOf<DivNode> {
  static constexpr const char* kName = "div";
  Saved b, out;
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    const Tensor& bv = b.get(kName);
    const Tensor& outv = out.get(kName);  // undefined unless b needs a gradient
    add_map2(ctx, 0, dout, bv, kName, [](auto g, auto y) { return g / y; });
    if (ctx.needs_grad(1)) {
      const Tensor q = map2(outv, bv, kName, [](auto o, auto y) { return o / y; });
      add_map2(ctx, 1, dout, q, kName, [](auto g, auto r) { return -g * r; });
    }
  }
};

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = map2(a, b, "div", [](auto x, auto y) { return x / y; });
  if (auto* node = record<DivNode>(out, a, b)) {
    node->b = b;
    if (node->inputs[1].meta) node->out = out;
  }
  return out;
}

// neg.     x -> y = -x
// backward: dx = -dy
struct NegNode : NodeOf<NegNode> {
  static constexpr const char* kName = "neg";
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    ctx.accumulate(0, dy, -1);
  }
};

Tensor neg(const Tensor& x) {
  Tensor y = map(x, "neg", [](auto v) { return -v; });
  record<NegNode>(y, x);
  return y;
}

// add_scalar.   x -> y = x + c
// backward: dx = dy
struct AddScalarNode : NodeOf<AddScalarNode> {
  static constexpr const char* kName = "add_scalar";
  void backward(const Tensor& dy, BackwardContext& ctx) override { ctx.pass_through(0, dy); }
};

Tensor add(const Tensor& x, double c) {
  Tensor y = map(x, "add_scalar", [c](auto v) { return v + static_cast<decltype(v)>(c); });
  record<AddScalarNode>(y, x);
  return y;
}

// mul_scalar.   x -> y = c · x
// backward: dx = c · dy
struct MulScalarNode : NodeOf<MulScalarNode> {
  static constexpr const char* kName = "mul_scalar";
  double c = 1;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    ctx.accumulate(0, dy, c);
  }
};

Tensor mul(const Tensor& x, double c) {
  Tensor y = map(x, "mul_scalar", [c](auto v) { return static_cast<decltype(v)>(c) * v; });
  if (auto* node = record<MulScalarNode>(y, x)) node->c = c;
  return y;
}

// pow.     x -> y = x^p   (constant p)
// backward: dx = dy ⊙ p · x^(p-1)
// saves   : x
struct PowNode : NodeOf<PowNode> {
  static constexpr const char* kName = "pow";
  Saved x;
  double p = 1;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    const Tensor& xv = x.get(kName);
    add_map2(ctx, 0, dy, xv, kName, [p = p](auto g, auto v) {
      using T = decltype(v);
      return g * static_cast<T>(p) * static_cast<T>(std::pow(v, static_cast<T>(p - 1)));
    });
  }
};

Tensor pow(const Tensor& x, double p) {
  Tensor y = map(x, "pow", [p](auto v) {
    using T = decltype(v);
    return static_cast<T>(std::pow(v, static_cast<T>(p)));
  });
  if (auto* node = record<PowNode>(y, x)) {
    node->x = x;
    node->p = p;
  }
  return y;
}

namespace {
using K = InputSpec::Kind;
const bool registered = register_gradchecks({
    op_case("elementwise/add/same-shape", {{{3, 4}}, {{3, 4}}}, [](auto& in) { return add(in[0], in[1]); }),
    op_case("elementwise/add/broadcast-both", {{{3, 1, 5}}, {{4, 1}}}, [](auto& in) { return in[0] + in[1]; }),
    op_case("elementwise/sub/broadcast-both", {{{2, 3, 1}}, {{1, 4}}}, [](auto& in) { return in[0] - in[1]; }),
    op_case("elementwise/mul/broadcast-both", {{{3, 1, 5}}, {{4, 1}}}, [](auto& in) { return in[0] * in[1]; }),
    op_case("elementwise/mul/row-bias", {{{2, 3, 4}}, {{4}}}, [](auto& in) { return in[0] * in[1]; }),
    op_case("elementwise/div/broadcast-both", {{{3, 1, 5}}, {{4, 1}, K::positive}},
            [](auto& in) { return in[0] / in[1]; }),
    op_case("elementwise/neg", {{{2, 5}}}, [](auto& in) { return -in[0]; }),
    op_case("elementwise/add_scalar", {{{2, 5}}}, [](auto& in) { return in[0] + 2.5; }),
    op_case("elementwise/mul_scalar", {{{2, 5}}}, [](auto& in) { return in[0] * -1.5; }),
    op_case("elementwise/pow", {{{3, 4}, K::positive}}, [](auto& in) { return pow(in[0], 2.5); }),
    op_case("elementwise/pow/negative-exponent", {{{3, 4}, K::positive}}, [](auto& in) { return pow(in[0], -0.5); }),
});
}  // namespace

}  // namespace tapegrad
