// Layer normalisation over the last dim, fused forward and backward.
//
// Row statistics are computed in double for both dtypes and the variance in two passes, mean((x - μ)²),
// never E[x²] - μ²: for a row with mean 1e4 and std 1e-3 the latter subtracts two numbers near 1e8 that
// agree in every digit float32 (and most that float64) has, leaving noise or a negative variance.
#include "autograd/ops/layernorm.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "autograd/kernels.h"
#include "autograd/ops/views.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

namespace {
// Row reductions in double as four interleaved partial sums: independent chains of additions that the
// compiler also vectorises (only the rounding order differs from one running sum).
template <class T>
double row_sum(const T* x, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 += x[k];
    s1 += x[k + 1];
    s2 += x[k + 2];
    s3 += x[k + 3];
  }
  for (; k < n; ++k) s0 += x[k];
  return (s0 + s1) + (s2 + s3);
}

/// sum_k (x_k - μ)²
template <class T>
double row_centred_squares(const T* x, double mu, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 += (x[k] - mu) * (x[k] - mu);
    s1 += (x[k + 1] - mu) * (x[k + 1] - mu);
    s2 += (x[k + 2] - mu) * (x[k + 2] - mu);
    s3 += (x[k + 3] - mu) * (x[k + 3] - mu);
  }
  for (; k < n; ++k) s0 += (x[k] - mu) * (x[k] - mu);
  return (s0 + s1) + (s2 + s3);
}

/// sum_k a_k b_k
double row_dot(const double* a, const double* b, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 += a[k] * b[k];
    s1 += a[k + 1] * b[k + 1];
    s2 += a[k + 2] * b[k + 2];
    s3 += a[k + 3] * b[k + 3];
  }
  for (; k < n; ++k) s0 += a[k] * b[k];
  return (s0 + s1) + (s2 + s3);
}

// Rows are processed in blocks: first each row's sums, then the divisions and square roots of the whole
// block in one loop of independent operations (which vectorises), then the outputs. Done row by row,
// each row of a narrow layer (C = 32) would be one long chain of latencies (sum, divide, sum, square
// root, divide) that leaves the core mostly idle.
constexpr int64_t kBlockRows = 64;
}  // namespace

// layer_norm.   x: (..., C), weight w: (C) or none, bias b: (C) or none -> y: (..., C);  per row of C:
// forward : μ = mean(x),  σ² = mean((x - μ)²),  r = 1/√(σ² + eps),  x̂ = (x - μ) r,  y = x̂ ⊙ w + b
// gradient: ∂μ/∂x_k = 1/C,  ∂σ²/∂x_k = 2(x_k - μ)/C  (as sum_j (x_j - μ) = 0),
//           ∂r/∂x_k = -½ r³ · 2(x_k - μ)/C = -r² x̂_k / C,  so
//           ∂x̂_i/∂x_k = r (δ_ik - 1/C) + (x_i - μ) ∂r/∂x_k = r (δ_ik - 1/C - x̂_i x̂_k / C)   (symmetric)
// backward: with g = dy ⊙ w (the gradient reaching x̂),
//           dx_k = sum_i g_i ∂x̂_i/∂x_k = r (g_k - mean(g) - x̂_k mean(g ⊙ x̂)),  i.e.
//           dx = r · (g - mean(g) - x̂ · mean(g ⊙ x̂))
//           dw = sum_rows dy ⊙ x̂,   db = sum_rows dy
// saves   : x, μ and r per row (x̂ is recomputed from them), w when it exists
struct LayerNormNode : NodeOf<LayerNormNode> {
  static constexpr const char* kName = "layer_norm";
  Saved x;       // contiguous (rows, C)
  Saved weight;  // (C), or undefined
  std::vector<double> mean, rstd;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    const Tensor& xv = x.get(kName);
    const Tensor& wv = weight.get(kName);
    if (!(dy.shape() == xv.shape()))
      throw AutogradError(cat(kName, " backward: dy ", dy.shape(), " vs x ", xv.shape()));
    const bool want_dw = ctx.needs_grad(1), want_db = ctx.needs_grad(2);
    const int64_t C = xv.shape().back(), rows = C > 0 ? xv.numel() / C : 0;
    std::vector<double> dw_sum(want_dw ? C : 0, 0.0), db_sum(want_db ? C : 0, 0.0);
    std::vector<double> xhat(kBlockRows * C), g(kBlockRows * C);  // one block of rows
    double mean_g[kBlockRows], mean_gx[kBlockRows];
    // One pass over the rows: x̂ and g of a block of rows, their sums into dw and db, then dx's rows
    // (none when x needs no gradient: dx is then NoGrad).
    auto pass = [&](auto dx) {
      using T = typename decltype(dx)::value_type;
      constexpr bool kDx = !std::is_same_v<decltype(dx), NoGrad<T>>;
      const T *px = xv.data<T>(), *pdy = dy.data<T>(), *pw = wv.defined() ? wv.data<T>() : nullptr;
      for (int64_t row0 = 0; row0 < rows; row0 += kBlockRows) {
        const int64_t count = std::min(kBlockRows, rows - row0);
        for (int64_t i = 0; i < count; ++i) {  // x̂, g, dw, db and the two sums of each row
          const int64_t row = row0 + i;
          const T *in = px + row * C, *d = pdy + row * C;
          double *xh = xhat.data() + i * C, *gi = g.data() + i * C;
          const double mu = mean[row], r = rstd[row];
          for (int64_t k = 0; k < C; ++k) xh[k] = (in[k] - mu) * r;
          if (pw)
            for (int64_t k = 0; k < C; ++k) gi[k] = static_cast<double>(d[k]) * pw[k];
          else
            for (int64_t k = 0; k < C; ++k) gi[k] = static_cast<double>(d[k]);
          if (want_dw)
            for (int64_t k = 0; k < C; ++k) dw_sum[k] += d[k] * xh[k];
          if (want_db)
            for (int64_t k = 0; k < C; ++k) db_sum[k] += d[k];
          mean_g[i] = row_sum(gi, C);
          mean_gx[i] = row_dot(gi, xh, C);
        }
        if constexpr (kDx) {
          for (int64_t i = 0; i < count; ++i) {  // mean(g) and mean(g ⊙ x̂) of the block
            mean_g[i] /= static_cast<double>(C);
            mean_gx[i] /= static_cast<double>(C);
          }
          for (int64_t i = 0; i < count; ++i) {  // dx = r · (g - mean(g) - x̂ · mean(g ⊙ x̂))
            const double r = rstd[row0 + i], mg = mean_g[i], mgx = mean_gx[i];
            const double *xh = xhat.data() + i * C, *gi = g.data() + i * C;
            const auto out = dx + (row0 + i) * C;
            for (int64_t k = 0; k < C; ++k) out[k] += static_cast<T>(r * (gi[k] - mg - xh[k] * mgx));
          }
        }
      }
    };
    if (ctx.needs_grad(0)) ctx.add_into(0, pass);
    else dispatch_float(xv.dtype(), kName, [&](auto tag) { pass(NoGrad<decltype(tag)>{}); });
    ctx.add_into(1, [&](auto dw) {
      using T = typename decltype(dw)::value_type;
      for (int64_t k = 0; k < C; ++k) dw[k] += static_cast<T>(dw_sum[k]);
    });
    ctx.add_into(2, [&](auto db) {
      using T = typename decltype(db)::value_type;
      for (int64_t k = 0; k < C; ++k) db[k] += static_cast<T>(db_sum[k]);
    });
  }
};

namespace {
/// weight or bias: undefined, or (C) of x's dtype.
void check_affine(const Tensor& p, const char* what, const Tensor& x) {
  if (!p.defined()) return;
  if (p.dim() != 1 || p.shape()[0] != x.shape().back())
    throw ShapeError(cat("layer_norm: ", what, " ", p.shape(), " does not match the last dim of x ", x.shape()));
  if (p.dtype() != x.dtype())
    throw DTypeError(cat("layer_norm: ", what, " ", p.shape(), " is ", dtype_name(p.dtype()), " but x ", x.shape(),
                         " is ", dtype_name(x.dtype())));
}
}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  if (x.dim() == 0) throw ShapeError("layer_norm: x must have at least one dim, got a scalar");
  if (!is_floating(x.dtype()))
    throw DTypeError(cat("layer_norm: x ", x.shape(), " must be float32 or float64, got ", dtype_name(x.dtype())));
  check_affine(weight, "weight", x);
  check_affine(bias, "bias", x);
  if (!(eps >= 0)) throw ValueError(cat("layer_norm: eps must be >= 0, got ", eps));

  const Tensor xc = x.detach().contiguous();
  const Tensor wc = weight.defined() ? weight.detach().contiguous() : Tensor();
  const Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  const int64_t C = x.shape().back(), rows = C > 0 ? x.numel() / C : 0;
  std::vector<double> mean(rows), rstd(rows);
  Tensor y = empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const T *px = xc.data<T>(), *pw = wc.defined() ? wc.data<T>() : nullptr,
            *pb = bc.defined() ? bc.data<T>() : nullptr;
    T* py = y.data<T>();
    double squares[kBlockRows];
    for (int64_t row0 = 0; row0 < rows; row0 += kBlockRows) {
      const int64_t count = std::min(kBlockRows, rows - row0);
      for (int64_t i = 0; i < count; ++i) {  // μ and sum (x - μ)² of each row
        const T* in = px + (row0 + i) * C;
        const double mu = row_sum(in, C) / static_cast<double>(C);
        mean[row0 + i] = mu;
        squares[i] = row_centred_squares(in, mu, C);
      }
      for (int64_t i = 0; i < count; ++i)  // σ² and r of the block
        rstd[row0 + i] = 1.0 / std::sqrt(squares[i] / static_cast<double>(C) + eps);
      for (int64_t i = 0; i < count; ++i) {  // y = x̂ ⊙ w + b, one plain loop per case
        const T* in = px + (row0 + i) * C;
        T* out = py + (row0 + i) * C;
        const double mu = mean[row0 + i], r = rstd[row0 + i];
        if (pw && pb)
          for (int64_t k = 0; k < C; ++k) out[k] = static_cast<T>((in[k] - mu) * r * pw[k] + pb[k]);
        else if (pw)
          for (int64_t k = 0; k < C; ++k) out[k] = static_cast<T>((in[k] - mu) * r * pw[k]);
        else if (pb)
          for (int64_t k = 0; k < C; ++k) out[k] = static_cast<T>((in[k] - mu) * r + pb[k]);
        else
          for (int64_t k = 0; k < C; ++k) out[k] = static_cast<T>((in[k] - mu) * r);
      }
    }
  });
  if (auto* node = record<LayerNormNode>(y, x, weight, bias)) {
    node->x = xc;
    node->weight = wc;
    node->mean = std::move(mean);
    node->rstd = std::move(rstd);
  }
  return y;
}

namespace {
const bool registered = register_gradchecks({
    op_case("layernorm/affine", {{{2, 3, 5}}, {{5}}, {{5}}},
                    [](auto& in) { return layer_norm(in[0], in[1], in[2]); }),
    op_case("layernorm/no-affine", {{{2, 3, 5}}},
                    [](auto& in) { return layer_norm(in[0], Tensor(), Tensor()); }),
    op_case("layernorm/weight-only-of-transposed", {{{5, 4}}, {{5}}},
                    [](auto& in) { return layer_norm(transpose(in[0], 0, 1), in[1], Tensor(), 1e-3); }),
});
}  // namespace

}  // namespace tapegrad
