// Copies: Tensor::contiguous, clone and to(dtype).   x: any -> y: same shape, contiguous
#include "autograd/elementwise_map.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

namespace {
Tensor copy_of(const Tensor& x, DType dtype) {
  Tensor y = empty(x.shape(), dtype);
  NoGradGuard no_grad;  // y is fresh; the copy itself is recorded by the caller
  y.copy_(x);
  return y;
}
}  // namespace

// copy.    y = x (a fresh contiguous buffer)
// backward: dx = dy
struct CopyNode : NodeOf<CopyNode> {
  static constexpr const char* kName = "copy";
  void backward(const Tensor& dy, BackwardContext& ctx) override { ctx.pass_through(0, dy); }
};

Tensor Tensor::clone() const {
  Tensor y = copy_of(*this, dtype());
  record<CopyNode>(y, *this);
  return y;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

// to.      y = x converted to another float dtype
// backward: dx = dy converted back to x's dtype
struct ConvertNode : NodeOf<ConvertNode> {
  static constexpr const char* kName = "to";
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    if (ctx.needs_grad(0)) ctx.accumulate(0, copy_of(dy, inputs[0].dtype));
  }
};

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor y = copy_of(*this, target);
  if (is_floating(target)) record<ConvertNode>(y, *this);
  return y;
}

namespace {
const bool registered = register_gradchecks({
    op_case("copy/clone", {{{3, 4}}}, [](auto& in) { return in[0].clone(); }),
    // Through float32 and back: the inputs and the step are dyadic (k/64 and 1/1024), so every value
    // is exact in float32 and the central difference of this linear map has no rounding error.
    GradcheckCase{"copy/to-float32-and-back",
                  [](const GradcheckOptions& options) {
                    std::vector<double> values;
                    for (int k = 0; k < 12; ++k) values.push_back((k - 5) / 64.0);
                    Tensor x = tensor(values, {3, 4}, DType::float64).requires_grad_();
                    GradcheckOptions exact = options;
                    exact.eps = 1.0 / 1024;
                    return gradcheck([](auto& in) { return in[0].to(DType::float32).to(DType::float64); },
                                     {x}, exact);
                  }},
});
}  // namespace

}  // namespace tapegrad
