// softmax and log_softmax over one dim, stable and fused, with hand-derived backward rules; and the
// explicit softmax Jacobian for teaching and tests.
//
// Layout: the op runs on a contiguous copy of x (x itself when already contiguous), seen as
// (outer, n, inner) with the softmax dim in the middle. The last dim (inner == 1) is the fast path:
// every row is n adjacent elements. Any other dim walks the same rows with stride `inner`. The output,
// the saved y, dy and the gradient buffer are all contiguous of x's shape, so they share the layout.
//
// A row that is entirely -inf (every key masked) has no defined softmax. We return zeros for softmax
// (an attention row with no keys then mixes no values) and -inf for log_softmax (log 0), both with a
// zero gradient, instead of the NaN that exp(-inf - -inf) would give.
//
// The row kernels (reductions in four chains, a vectorised expf for softmax's contiguous float rows) are in
// autograd/kernels/softmax.h beside plain references, which says which kernel uses what; this file is the
// math and the walk over rows.
#include "autograd/ops/softmax.h"

#include <cstdint>
#include <vector>

#include "autograd/kernels/softmax.h"
#include "autograd/ops/views.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

namespace {

/// The contiguous tensor viewed as (outer, n, inner) around dim d.
struct RowLayout {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t rows() const { return outer * inner; }
  /// Offset of the first element of row r (rows ordered outer-major), in elements.
  int64_t start(int64_t r) const { return (r / inner) * n * inner + r % inner; }
  /// Distance between consecutive elements of a row.
  int64_t step() const { return inner; }
};

RowLayout row_layout(const Shape& shape, int d) {
  RowLayout layout;
  for (int i = 0; i < d; ++i) layout.outer *= shape[i];
  layout.n = shape[d];
  for (int i = d + 1; i < shape.rank(); ++i) layout.inner *= shape[i];
  return layout;
}

/// Calls body(offset, stride) once per row; the last-dim case passes the literal stride 1 so that the
/// row loops compile to plain contiguous loops.
template <class Body>
void for_each_softmax_row(const RowLayout& layout, Body&& body) {
  if (layout.n == 0) return;
  if (layout.inner == 1) {
    for (int64_t r = 0; r < layout.outer; ++r) body(r * layout.n, kContiguous);
  } else {
    for (int64_t r = 0; r < layout.rows(); ++r) body(layout.start(r), layout.step());
  }
}

void check_backward_shapes(const Tensor& dy, const Tensor& y, const char* op) {
  if (!(dy.shape() == y.shape()) || dy.dtype() != y.dtype())
    throw AutogradError(cat(op, " backward: dy ", dy.shape(), " ", dtype_name(dy.dtype()), " vs y ", y.shape(), " ",
                            dtype_name(y.dtype())));
}

/// The dim, wrapped, after checking that x is a floating tensor with at least one dim.
int checked_dim(const Tensor& x, int64_t dim, const char* op) {
  if (!is_floating(x.dtype()))
    throw DTypeError(
        cat(op, ": expected a float32 or float64 tensor, got ", dtype_name(x.dtype()), " of shape ", x.shape()));
  return wrap_dim(dim, x.dim(), op, x.shape());
}

}  // namespace

// softmax and log_softmax differ only in their row kernels (autograd/kernels/softmax.h). Each op is a Rule
// under its math: its name, its forward row and its backward row, side by side; one node and one recording
// function serve both.
//   Rule::forward (x, y, n, stride)       y = the op of one row of x
//   Rule::backward(y, dy, dx, n, stride)  dx += the op's backward on one row, from its output y alone

/// The node of a row op: saves y only, and runs Rule::backward over every row of dy.
template <class Rule>
struct RowSoftmaxNode : NodeOf<RowSoftmaxNode<Rule>> {
  static constexpr const char* kName = Rule::kName;
  Saved y;
  int dim = -1;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    if (!ctx.needs_grad(0)) return;
    const Tensor& yv = y.get(kName);
    check_backward_shapes(dy, yv, kName);
    const RowLayout layout = row_layout(yv.shape(), dim);
    ctx.add_into(0, [&](auto dx) {
      using T = typename decltype(dx)::value_type;
      const T *py = yv.data<T>(), *pdy = dy.data<T>();
      for_each_softmax_row(layout, [&](int64_t offset, auto stride) {
        Rule::backward(py + offset, pdy + offset, dx + offset, layout.n, stride);
      });
    });
  }
};

/// y = Rule::forward of every row of the contiguous x around dim d.
template <class Rule>
Tensor row_softmax_forward(const Tensor& x, int d) {
  Tensor y = empty(x.shape(), x.dtype());
  const RowLayout layout = row_layout(x.shape(), d);
  dispatch_float(x.dtype(), Rule::kName, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for_each_softmax_row(layout, [&](int64_t offset, auto stride) {
      Rule::forward(px + offset, py + offset, layout.n, stride);
    });
  });
  return y;
}

/// The op of a Rule along dim: checks x, computes y and records a RowSoftmaxNode<Rule>.
template <class Rule>
Tensor row_softmax(const Tensor& x, int64_t dim) {
  const int d = checked_dim(x, dim, Rule::kName);
  Tensor y = row_softmax_forward<Rule>(x.detach().contiguous(), d);
  if (auto* node = record<RowSoftmaxNode<Rule>>(y, x)) {
    node->y = y;
    node->dim = d;
  }
  return y;
}

// softmax over dim.   x: (..., n, ...) -> y: same shape;  per row (the n elements along dim):
// forward : y_i = exp(x_i - m) / sum_j exp(x_j - m),  m = max_j x_j   (m cancels; it only keeps exp ≤ 1)
// Jacobian: dy_i/dx_k = y_i δ_ik - y_i y_k,  i.e. J = diag(y) - y yᵀ   (symmetric)
// backward: dx_k = sum_i dy_i J_ik = y_k dy_k - y_k sum_i dy_i y_i,  i.e.
//           dx = Jᵀ dy = y ⊙ (dy - <dy, y>)      O(n) per row; J is never built
// saves   : y only
struct SoftmaxRule {
  static constexpr const char* kName = "softmax";
  static constexpr auto forward = [](auto... row) { softmax_row(row...); };
  static constexpr auto backward = [](auto... row) { softmax_row_backward(row...); };
};

Tensor softmax(const Tensor& x, int64_t dim) { return row_softmax<SoftmaxRule>(x, dim); }

// log_softmax over dim.   x: (..., n, ...) -> y: same shape;  per row:
// forward : y_i = x_i - m - log sum_j exp(x_j - m),  m = max_j x_j
// Jacobian: dy_i/dx_k = δ_ik - softmax(x)_k,  and softmax(x) = exp(y)
// backward: dx_k = sum_i dy_i (δ_ik - exp(y_k)) = dy_k - exp(y_k) sum_i dy_i,  i.e.
//           dx = dy - exp(y) · sum(dy)      O(n) per row
// saves   : y only (a fully masked row, all y = -inf, gets zero gradient: see the file comment)
struct LogSoftmaxRule {
  static constexpr const char* kName = "log_softmax";
  static constexpr auto forward = [](auto... row) { log_softmax_row(row...); };
  static constexpr auto backward = [](auto... row) { log_softmax_row_backward(row...); };
};

Tensor log_softmax(const Tensor& x, int64_t dim) { return row_softmax<LogSoftmaxRule>(x, dim); }

// softmax_jacobian.   p: (n) -> J: (n, n),  J_ik = p_i δ_ik - p_i p_k   (not recorded)
Tensor softmax_jacobian(const Tensor& p) {
  if (p.dim() != 1) throw ShapeError(cat("softmax_jacobian: expected a 1-D probability vector, got shape ", p.shape()));
  if (!is_floating(p.dtype()))
    throw DTypeError(cat("softmax_jacobian: expected a float32 or float64 tensor, got ", dtype_name(p.dtype())));
  const int64_t n = p.numel();
  const std::vector<double> v = p.to_vector();
  std::vector<double> jacobian(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < n; ++k) jacobian[i * n + k] = (i == k ? v[i] : 0.0) - v[i] * v[k];
  return tensor(jacobian, {n, n}, p.dtype());
}

namespace {
const bool registered = register_gradchecks({
    op_case("softmax/softmax/last-dim", {{{3, 5}}}, [](auto& in) { return softmax(in[0]); }),
    op_case("softmax/softmax/middle-dim", {{{2, 4, 3}}}, [](auto& in) { return softmax(in[0], 1); }),
    op_case("softmax/softmax/of-transposed", {{{4, 3}}}, [](auto& in) { return softmax(transpose(in[0], 0, 1)); }),
    op_case("softmax/log_softmax/last-dim", {{{3, 5}}}, [](auto& in) { return log_softmax(in[0]); }),
    op_case("softmax/log_softmax/first-dim", {{{4, 3}}}, [](auto& in) { return log_softmax(in[0], 0); }),
});
}  // namespace

}  // namespace tapegrad
