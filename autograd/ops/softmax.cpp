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
#include "autograd/ops/softmax.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "autograd/kernels.h"
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
    for (int64_t r = 0; r < layout.outer; ++r) body(r * layout.n, std::integral_constant<int64_t, 1>{});
  } else {
    for (int64_t r = 0; r < layout.rows(); ++r) body(layout.start(r), layout.step());
  }
}

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// y_i = exp(x_i - m) for a contiguous float row, bit for bit what std::exp(float) returns: glibc's expf
/// (its FMA variant, sysdeps/ieee754/flt-32/e_expf.c), evaluated four lanes at a time with the same
/// operations in the same order (the same fused multiply-adds, the same 32-entry table of 2^(i/32)).
/// Checked against expf for all 2^32 float inputs. Lanes that expf treats specially (|x - m| >= 88,
/// NaN, +inf) are recomputed with std::exp; -inf, a masked score, gives 0 as expf does. The softmax of
/// attention spends most of its time here: scalar expf calls leave the vector units idle. y must not
/// overlap x.
//   expf: with k = round(x · 32/ln2) and r = x · 32/ln2 - k (|r| <= 1/2), exp(x) = 2^(k/32) · 2^(r/32),
//         2^(k/32) = s from the table entry k mod 32 with k div 32 added to its exponent bits, and
//         2^(r/32) ≈ C0 r³ + C1 r² + C2 r + 1, all in double, rounded to float once at the end.
void exp_shifted(const float* x, float m, float* y, int64_t n) {
#if defined(__AVX2__) && defined(__FMA__)
  alignas(32) static constexpr uint64_t kTable[32] = {
      0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
      0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
      0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
      0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
      0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
      0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
      0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
      0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
  };
  const __m256d inv_ln2_n = _mm256_set1_pd(0x1.71547652b82fep+5), shift = _mm256_set1_pd(0x1.8p+52);
  const __m256d c0 = _mm256_set1_pd(0x1.c6af84b912394p-20), c1 = _mm256_set1_pd(0x1.ebfce50fac4f3p-13),
                c2 = _mm256_set1_pd(0x1.62e42ff0c52d6p-6), one = _mm256_set1_pd(1.0);
  const __m128 mv = _mm_set1_ps(m), neg_inf = _mm_set1_ps(-std::numeric_limits<float>::infinity());
  const __m128i top_mask = _mm_set1_epi32(0x7ff), top_limit = _mm_set1_epi32(0x42a);
  const __m256i index_mask = _mm256_set1_epi64x(31);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 xf = _mm_sub_ps(_mm_loadu_ps(x + i), mv);
    const __m128 is_neg_inf = _mm_cmpeq_ps(xf, neg_inf);
    const __m128i abstop = _mm_and_si128(_mm_srli_epi32(_mm_castps_si128(xf), 20), top_mask);
    const __m128 special = _mm_andnot_ps(is_neg_inf, _mm_castsi128_ps(_mm_cmpgt_epi32(abstop, top_limit)));
    const __m256d xd = _mm256_cvtps_pd(xf);
    __m256d kd = _mm256_fmadd_pd(inv_ln2_n, xd, shift);  // adding 1.5·2^52 rounds to an integer: k
    const __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, shift);
    const __m256d r = _mm256_fmsub_pd(inv_ln2_n, xd, kd);
    const __m256i t = _mm256_add_epi64(
        _mm256_i64gather_epi64(reinterpret_cast<const long long*>(kTable), _mm256_and_si256(ki, index_mask), 8),
        _mm256_slli_epi64(ki, 47));
    const __m256d z = _mm256_fmadd_pd(c0, r, c1), r2 = _mm256_mul_pd(r, r);
    __m256d yd = _mm256_fmadd_pd(c2, r, one);
    yd = _mm256_fmadd_pd(z, r2, yd);
    yd = _mm256_mul_pd(yd, _mm256_castsi256_pd(t));
    _mm_storeu_ps(y + i, _mm_andnot_ps(is_neg_inf, _mm256_cvtpd_ps(yd)));
    if (const int lanes = _mm_movemask_ps(special))
      for (int j = 0; j < 4; ++j)
        if (lanes & (1 << j)) y[i + j] = std::exp(x[i + j] - m);
  }
  for (; i < n; ++i) y[i] = std::exp(x[i] - m);
#else
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i] - m);
#endif
}

/// max_i x[i·stride] (n >= 1) with the semantics of the running `m = x_i > m ? x_i : m` from m = x[0]:
/// NaN when x[0] is NaN, other NaNs skipped. Computed as four interleaved running maxima that each start
/// from x[0], which the compiler can vectorise; the value is the same (only a tie of +0 and -0 may return
/// the other zero, which changes no x - m).
template <class T, class Stride>
T row_max(const T* x, int64_t n, Stride stride) {
  T m0 = x[0], m1 = x[0], m2 = x[0], m3 = x[0];
  int64_t i = 1;
  for (; i + 4 <= n; i += 4) {
    m0 = x[i * stride] > m0 ? x[i * stride] : m0;
    m1 = x[(i + 1) * stride] > m1 ? x[(i + 1) * stride] : m1;
    m2 = x[(i + 2) * stride] > m2 ? x[(i + 2) * stride] : m2;
    m3 = x[(i + 3) * stride] > m3 ? x[(i + 3) * stride] : m3;
  }
  for (; i < n; ++i) m0 = x[i * stride] > m0 ? x[i * stride] : m0;
  m0 = m1 > m0 ? m1 : m0;
  m0 = m2 > m0 ? m2 : m0;
  return m3 > m0 ? m3 : m0;
}

/// sum_i x[i·stride] in double, as four interleaved partial sums (see dot_double).
template <class T, class Stride>
double sum_double(const T* x, int64_t n, Stride stride) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += x[i * stride];
    s1 += x[(i + 1) * stride];
    s2 += x[(i + 2) * stride];
    s3 += x[(i + 3) * stride];
  }
  for (; i < n; ++i) s0 += x[i * stride];
  return (s0 + s1) + (s2 + s3);
}

/// sum_i a[i·stride] · b[i·stride] in double, as four interleaved partial sums: independent chains of
/// additions, which the compiler can also vectorise (only the rounding order differs from one chain).
template <class T, class Stride>
double dot_double(const T* a, const T* b, int64_t n, Stride stride) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += static_cast<double>(a[i * stride]) * b[i * stride];
    s1 += static_cast<double>(a[(i + 1) * stride]) * b[(i + 1) * stride];
    s2 += static_cast<double>(a[(i + 2) * stride]) * b[(i + 2) * stride];
    s3 += static_cast<double>(a[(i + 3) * stride]) * b[(i + 3) * stride];
  }
  for (; i < n; ++i) s0 += static_cast<double>(a[i * stride]) * b[i * stride];
  return (s0 + s1) + (s2 + s3);
}

/// y = softmax (or log_softmax) of every row of the contiguous x.
Tensor softmax_forward(const Tensor& x, int d, bool log, const char* op) {
  Tensor y = empty(x.shape(), x.dtype());
  const RowLayout layout = row_layout(x.shape(), d);
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for_each_softmax_row(layout, [&](int64_t offset, auto stride) {
      const T* in = px + offset;
      T* out = py + offset;
      const int64_t n = layout.n;
      const T m = row_max(in, n, stride);
      if (m == T(kNegInf)) {  // fully masked row: see the file comment
        const T fill = log ? T(kNegInf) : T(0);
        for (int64_t i = 0; i < n; ++i) out[i * stride] = fill;
        return;
      }
      double s = 0;  // every term is in (0, 1] and one is exactly 1, so s is in [1, n]: no overflow
      if (log) {
        for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(in[i * stride] - m));
        const T log_s = static_cast<T>(std::log(s));  // (x - m) first: exact near the max, even for huge m
        for (int64_t i = 0; i < n; ++i) out[i * stride] = (in[i * stride] - m) - log_s;
      } else {
        // The exps first and their sum after: a running sum would live across the exp calls, which
        // clobber every vector register, and turn the loop into a chain through memory.
        if constexpr (std::is_same_v<T, float> && std::is_same_v<decltype(stride), std::integral_constant<int64_t, 1>>)
          exp_shifted(in, m, out, n);
        else
          for (int64_t i = 0; i < n; ++i) out[i * stride] = std::exp(in[i * stride] - m);
        s = sum_double(out, n, stride);
        const T inv = static_cast<T>(1.0 / s);
        for (int64_t i = 0; i < n; ++i) out[i * stride] *= inv;
      }
    });
  });
  return y;
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

// Row kernels for fused ops (attention): the same arithmetic as softmax and its backward on one row.
namespace {
template <class T>
void softmax_row_impl(const T* x, T* y, int64_t n) {
  const std::integral_constant<int64_t, 1> unit;
  const T m = row_max(x, n, unit);
  if (m == T(kNegInf)) {  // fully masked row: see the file comment
    std::fill(y, y + n, T(0));
    return;
  }
  if constexpr (std::is_same_v<T, float>) exp_shifted(x, m, y, n);
  else for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i] - m);
  const T inv = static_cast<T>(1.0 / sum_double(y, n, unit));
  for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}
template <class T>
void softmax_row_backward_impl(const T* y, const T* dy, T* dx, int64_t n) {
  const T c = static_cast<T>(dot_double(dy, y, n, std::integral_constant<int64_t, 1>{}));  // <dy, y>
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] * (dy[i] - c);
}
}  // namespace

void softmax_row(const float* x, float* y, int64_t n) { softmax_row_impl(x, y, n); }
void softmax_row(const double* x, double* y, int64_t n) { softmax_row_impl(x, y, n); }
void softmax_row_backward(const float* y, const float* dy, float* dx, int64_t n) { softmax_row_backward_impl(y, dy, dx, n); }
void softmax_row_backward(const double* y, const double* dy, double* dx, int64_t n) {
  softmax_row_backward_impl(y, dy, dx, n);
}

// softmax over dim.   x: (..., n, ...) -> y: same shape;  per row (the n elements along dim):
// forward : y_i = exp(x_i - m) / sum_j exp(x_j - m),  m = max_j x_j   (m cancels; it only keeps exp ≤ 1)
// Jacobian: dy_i/dx_k = y_i δ_ik - y_i y_k,  i.e. J = diag(y) - y yᵀ   (symmetric)
// backward: dx_k = sum_i dy_i J_ik = y_k dy_k - y_k sum_i dy_i y_i,  i.e.
//           dx = Jᵀ dy = y ⊙ (dy - <dy, y>)      O(n) per row; J is never built
// saves   : y only
struct SoftmaxNode : NodeOf<SoftmaxNode> {
  static constexpr const char* kName = "softmax";
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
        const T *yr = py + offset, *g = pdy + offset;
        const auto d = dx + offset;
        const T c = static_cast<T>(dot_double(g, yr, layout.n, stride));  // <dy, y>
        for (int64_t i = 0; i < layout.n; ++i) d[i * stride] += yr[i * stride] * (g[i * stride] - c);
      });
    });
  }
};

Tensor softmax(const Tensor& x, int64_t dim) {
  const int d = checked_dim(x, dim, "softmax");
  Tensor y = softmax_forward(x.detach().contiguous(), d, /*log=*/false, "softmax");
  if (auto* node = record<SoftmaxNode>(y, x)) {
    node->y = y;
    node->dim = d;
  }
  return y;
}

// log_softmax over dim.   x: (..., n, ...) -> y: same shape;  per row:
// forward : y_i = x_i - m - log sum_j exp(x_j - m),  m = max_j x_j
// Jacobian: dy_i/dx_k = δ_ik - softmax(x)_k,  and softmax(x) = exp(y)
// backward: dx_k = sum_i dy_i (δ_ik - exp(y_k)) = dy_k - exp(y_k) sum_i dy_i,  i.e.
//           dx = dy - exp(y) · sum(dy)      O(n) per row
// saves   : y only (a fully masked row, all y = -inf, gets zero gradient: see the file comment)
struct LogSoftmaxNode : NodeOf<LogSoftmaxNode> {
  static constexpr const char* kName = "log_softmax";
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
        const T *yr = py + offset, *g = pdy + offset;
        const auto d = dx + offset;
        double total = 0;  // sum(dy)
        bool masked = true;
        for (int64_t i = 0; i < layout.n; ++i) {
          total += g[i * stride];
          masked = masked && yr[i * stride] == T(kNegInf);
        }
        if (masked) {  // a fully masked row: zero gradient (see the file comment)
          for (int64_t i = 0; i < layout.n; ++i) d[i * stride] += T(0);
          return;
        }
        const T c = static_cast<T>(total);
        for (int64_t i = 0; i < layout.n; ++i) d[i * stride] += g[i * stride] - std::exp(yr[i * stride]) * c;
      });
    });
  }
};

Tensor log_softmax(const Tensor& x, int64_t dim) {
  const int d = checked_dim(x, dim, "log_softmax");
  Tensor y = softmax_forward(x.detach().contiguous(), d, /*log=*/true, "log_softmax");
  if (auto* node = record<LogSoftmaxNode>(y, x)) {
    node->y = y;
    node->dim = d;
  }
  return y;
}

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
