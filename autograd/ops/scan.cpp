// Running sums along one dim.   x: (..., n, ...) -> y: same shape (contiguous)
// The tensor is walked as (outer, n, inner) over a contiguous copy: element (o, i, r) at (o·n + i)·inner + r.
#include "autograd/ops/scan.h"

#include "autograd/elementwise_map.h"
#include "autograd/ops/views.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

namespace {

/// Σ_{j≤i} x_j (forward) or Σ_{j≥i} x_j (reverse) along dim d, accumulated in double so that float32
/// prefixes of long sequences do not drift.
Tensor running_sum(const Tensor& x, int d, bool reverse, const char* op) {
  const Tensor in = x.contiguous();
  return dispatch_float(in.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    Tensor out = empty(in.shape(), in.dtype());
    const T* px = in.data<T>();
    T* py = out.data<T>();
    int64_t outer = 1, inner = 1;
    const int64_t n = in.shape()[d];
    for (int k = 0; k < d; ++k) outer *= in.shape()[k];
    for (int k = d + 1; k < in.dim(); ++k) inner *= in.shape()[k];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t r = 0; r < inner; ++r) {
        double total = 0;
        for (int64_t s = 0; s < n; ++s) {
          const int64_t i = reverse ? n - 1 - s : s;
          const int64_t at = (o * n + i) * inner + r;
          total += static_cast<double>(px[at]);
          py[at] = static_cast<T>(total);
        }
      }
    return out;
  });
}

}  // namespace

// cumsum along d.   y_i = Σ_{j≤i} x_j
// Jacobian: ∂y_i/∂x_k = [k ≤ i]   (lower triangular ones; never built)
// backward: dx_k = Σ_i dy_i [k ≤ i] = Σ_{i≥k} dy_i, the running sum of dy taken from the end   O(n)
// saves   : the dim only
struct CumsumNode : NodeOf<CumsumNode> {
  static constexpr const char* kName = "cumsum";
  int dim = 0;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    ctx.accumulate(0, running_sum(dy, dim, true, kName));
  }
};

Tensor cumsum(const Tensor& x, int64_t dim) {
  if (!is_floating(x.dtype()))
    throw DTypeError(cat("cumsum: x ", x.shape(), " is ", dtype_name(x.dtype()), "; expected float32 or float64"));
  const int d = wrap_dim(dim, x.dim(), "cumsum", x.shape());
  Tensor y = running_sum(x, d, false, "cumsum");
  if (auto* node = record<CumsumNode>(y, x)) node->dim = d;
  return y;
}

namespace {
const bool registered = register_gradchecks({
    op_case("scan/cumsum/middle-dim", {{{2, 5, 3}}}, [](auto& in) { return cumsum(in[0], 1); }),
    op_case("scan/cumsum/last-dim-of-a-transpose", {{{4, 3}}},
            [](auto& in) { return cumsum(transpose(in[0], 0, 1), -1); }),
});
}  // namespace

}  // namespace tapegrad
