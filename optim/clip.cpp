#include "optim/clip.h"

#include <cmath>

#include "autograd/tape.h"

namespace tapegrad::optim {

double grad_norm(const NamedParameters& params) {
  double sum_sq = 0;
  for (const auto& [name, p] : params) {
    const Tensor grad = p.grad();
    if (!grad.defined()) continue;
    const Tensor g = grad.contiguous();
    const int64_t n = g.numel();
    dispatch_float(g.dtype(), "grad_norm", [&](auto tag) {
      using T = decltype(tag);
      const T* x = g.template data<T>();
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += static_cast<double>(x[k]) * static_cast<double>(x[k]);
      sum_sq += s;
    });
  }
  return std::sqrt(sum_sq);
}

double clip_grad_norm(const NamedParameters& params, double max_norm) {
  if (!(max_norm > 0)) throw ValueError(cat("clip_grad_norm: max_norm must be > 0, got ", max_norm));
  const double total = grad_norm(params);
  if (!std::isfinite(total)) return total;
  const double coef = max_norm / (total + 1e-6);
  if (coef >= 1) return total;
  NoGradGuard no_grad;
  for (const auto& [name, p] : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!g.is_contiguous()) throw ValueError(cat("clip_grad_norm: grad of '", name, "' is not contiguous"));
    const int64_t n = g.numel();
    dispatch_float(g.dtype(), "clip_grad_norm", [&](auto tag) {
      using T = decltype(tag);
      T* x = g.template data<T>();
      const T scale = static_cast<T>(coef);
      for (int64_t k = 0; k < n; ++k) x[k] *= scale;
    });
    ++g.storage()->version;
  }
  return total;
}

}  // namespace tapegrad::optim
