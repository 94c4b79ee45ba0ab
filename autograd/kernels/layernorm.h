#pragma once
// Row kernels of layer normalisation over rows of C contiguous elements, each beside a plain reference.
// The math (and why the variance takes two passes) is in autograd/ops/layernorm.cpp. All row statistics
// are in double for both dtypes.
//
// fast: rows are processed in blocks of kBlockRows. First each row's sums, then the divisions and square
// roots of the whole block in one loop of independent operations (which vectorises), then the outputs.
// Done row by row, each row of a narrow layer (C = 32) would be one long chain of latencies (sum,
// divide, sum, square root, divide) that leaves the core mostly idle. Row sums use four chains
// (row_reductions.h), and y = x̂ ⊙ w + b is one plain loop per case of w and b present.
// reference: one row at a time, one running sum each, the formulas as written.
// They differ by the order of additions in double: a few double ulps of μ, r and the backward's means,
// invisible in most float outputs (tests/autograd/test_kernels.cpp states and checks the bound).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "autograd/kernels/grad_ptr.h"
#include "autograd/kernels/row_reductions.h"
#include "autograd/kernels/scratch.h"

namespace tapegrad {

inline constexpr int64_t kBlockRows = 64;

namespace detail {
struct LayerNormBlock;  // the scratch of x̂ and g for one block of rows
}

/// y = (x - μ) r ⊙ w + b per row, with μ and r = 1/√(σ² + eps) of each row written to mean and rstd.
/// x, y: (rows, C); w, b: (C) or null.
template <class T>
void layer_norm_rows(const T* x, const T* w, const T* b, T* y, double* mean, double* rstd, int64_t rows, int64_t C,
                     double eps) {
  double squares[kBlockRows];
  for (int64_t row0 = 0; row0 < rows; row0 += kBlockRows) {
    const int64_t count = std::min(kBlockRows, rows - row0);
    for (int64_t i = 0; i < count; ++i) {  // μ and sum (x - μ)² of each row
      const T* in = x + (row0 + i) * C;
      const double mu = row_sum(in, C, kContiguous) / static_cast<double>(C);
      mean[row0 + i] = mu;
      squares[i] = row_centred_squares(in, mu, C);
    }
    for (int64_t i = 0; i < count; ++i)  // σ² and r of the block
      rstd[row0 + i] = 1.0 / std::sqrt(squares[i] / static_cast<double>(C) + eps);
    for (int64_t i = 0; i < count; ++i) {  // y = x̂ ⊙ w + b, one plain loop per case
      const T* in = x + (row0 + i) * C;
      T* out = y + (row0 + i) * C;
      const double mu = mean[row0 + i], r = rstd[row0 + i];
      if (w && b)
        for (int64_t k = 0; k < C; ++k) out[k] = static_cast<T>((in[k] - mu) * r * w[k] + b[k]);
      else if (w)
        for (int64_t k = 0; k < C; ++k) out[k] = static_cast<T>((in[k] - mu) * r * w[k]);
      else if (b)
        for (int64_t k = 0; k < C; ++k) out[k] = static_cast<T>((in[k] - mu) * r + b[k]);
      else
        for (int64_t k = 0; k < C; ++k) out[k] = static_cast<T>((in[k] - mu) * r);
    }
  }
}

template <class T>
void layer_norm_rows_reference(const T* x, const T* w, const T* b, T* y, double* mean, double* rstd, int64_t rows,
                               int64_t C, double eps) {
  for (int64_t row = 0; row < rows; ++row) {
    const T* in = x + row * C;
    const double mu = row_sum_reference(in, C) / static_cast<double>(C);
    const double r = 1.0 / std::sqrt(row_centred_squares_reference(in, mu, C) / static_cast<double>(C) + eps);
    for (int64_t k = 0; k < C; ++k)
      y[row * C + k] = static_cast<T>((in[k] - mu) * r * (w ? w[k] : T(1)) + (b ? b[k] : T(0)));
    mean[row] = mu;
    rstd[row] = r;
  }
}

/// With g = dy ⊙ w and x̂ = (x - μ) r per row:
///   dx += r · (g - mean(g) - x̂ · mean(g ⊙ x̂))    (dx a GradPtr; NoGrad<T> skips it)
///   dw_sum = sum_rows dy ⊙ x̂,  db_sum = sum_rows dy (in double; each may be null: not computed)
/// x, dy: (rows, C); w: (C) or null; mean, rstd: (rows) from the forward.
template <class T, class Dx>
void layer_norm_rows_backward(const T* x, const T* dy, const T* w, const double* mean, const double* rstd,
                              int64_t rows, int64_t C, Dx dx, double* dw_sum, double* db_sum) {
  constexpr bool kDx = !std::is_same_v<Dx, NoGrad<T>>;
  double* xhat = scratch<double, detail::LayerNormBlock>(2 * kBlockRows * C);
  double* g = xhat + kBlockRows * C;
  double mean_g[kBlockRows], mean_gx[kBlockRows];
  if (dw_sum) std::fill(dw_sum, dw_sum + C, 0.0);
  if (db_sum) std::fill(db_sum, db_sum + C, 0.0);
  for (int64_t row0 = 0; row0 < rows; row0 += kBlockRows) {
    const int64_t count = std::min(kBlockRows, rows - row0);
    for (int64_t i = 0; i < count; ++i) {  // x̂, g, dw, db and the two sums of each row
      const int64_t row = row0 + i;
      const T *in = x + row * C, *d = dy + row * C;
      double *xh = xhat + i * C, *gi = g + i * C;
      const double mu = mean[row], r = rstd[row];
      for (int64_t k = 0; k < C; ++k) xh[k] = (in[k] - mu) * r;
      if (w)
        for (int64_t k = 0; k < C; ++k) gi[k] = static_cast<double>(d[k]) * w[k];
      else
        for (int64_t k = 0; k < C; ++k) gi[k] = static_cast<double>(d[k]);
      if (dw_sum)
        for (int64_t k = 0; k < C; ++k) dw_sum[k] += d[k] * xh[k];
      if (db_sum)
        for (int64_t k = 0; k < C; ++k) db_sum[k] += d[k];
      mean_g[i] = row_sum(gi, C, kContiguous);
      mean_gx[i] = row_dot(gi, xh, C, kContiguous);
    }
    if constexpr (kDx) {
      for (int64_t i = 0; i < count; ++i) {  // mean(g) and mean(g ⊙ x̂) of the block
        mean_g[i] /= static_cast<double>(C);
        mean_gx[i] /= static_cast<double>(C);
      }
      for (int64_t i = 0; i < count; ++i) {  // dx = r · (g - mean(g) - x̂ · mean(g ⊙ x̂))
        const double r = rstd[row0 + i], mg = mean_g[i], mgx = mean_gx[i];
        const double *xh = xhat + i * C, *gi = g + i * C;
        const auto out = dx + (row0 + i) * C;
        for (int64_t k = 0; k < C; ++k) out[k] += static_cast<T>(r * (gi[k] - mg - xh[k] * mgx));
      }
    }
  }
}

template <class T>
void layer_norm_rows_backward_reference(const T* x, const T* dy, const T* w, const double* mean, const double* rstd,
                                        int64_t rows, int64_t C, T* dx, double* dw_sum, double* db_sum) {
  std::fill(dw_sum, dw_sum + C, 0.0);
  std::fill(db_sum, db_sum + C, 0.0);
  for (int64_t row = 0; row < rows; ++row) {
    const T *in = x + row * C, *d = dy + row * C;
    const double mu = mean[row], r = rstd[row];
    double sum_g = 0, sum_gx = 0;
    for (int64_t k = 0; k < C; ++k) {
      const double xh = (in[k] - mu) * r, gk = static_cast<double>(d[k]) * (w ? w[k] : T(1));
      sum_g += gk;
      sum_gx += gk * xh;
      dw_sum[k] += d[k] * xh;
      db_sum[k] += d[k];
    }
    const double mg = sum_g / static_cast<double>(C), mgx = sum_gx / static_cast<double>(C);
    for (int64_t k = 0; k < C; ++k) {
      const double xh = (in[k] - mu) * r, gk = static_cast<double>(d[k]) * (w ? w[k] : T(1));
      dx[row * C + k] = static_cast<T>(r * (gk - mg - xh * mgx));
    }
  }
}

}  // namespace tapegrad
