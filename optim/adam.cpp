#include "optim/adam.h"

#include <cmath>

#include "autograd/parallel.h"

namespace tapegrad::optim {

namespace {

const bool registered_adam = register_optimizer({
    .name = "adam",
    .help = "Adam (betas 0.9, 0.999; eps 1e-8) with L2 weight decay added to the gradient",
    .make = [](NamedParameters params, const Hyperparameters& h) -> std::unique_ptr<Optimizer> {
      return std::make_unique<Adam>(std::move(params), AdamOptions{.lr = h.lr, .weight_decay = h.weight_decay});
    },
});

const bool registered_adamw = register_optimizer({
    .name = "adamw",
    .help = "AdamW: Adam with decoupled weight decay, p·(1 − lr·wd) each step",
    .make = [](NamedParameters params, const Hyperparameters& h) -> std::unique_ptr<Optimizer> {
      return std::make_unique<AdamW>(std::move(params), AdamWOptions{.lr = h.lr, .weight_decay = h.weight_decay});
    },
});

}  // namespace

Adam::Adam(NamedParameters params, const AdamOptions& options) : Adam("Adam", std::move(params), options, false) {}

Adam::Adam(const char* name, NamedParameters params, const AdamOptions& options, bool decoupled)
    : Optimizer(name, std::move(params), options.lr), options_(options), decoupled_(decoupled) {
  const AdamOptions& o = options_;
  check_option(o.beta1 >= 0 && o.beta1 < 1, name, "beta1", "in [0, 1)", o.beta1);
  check_option(o.beta2 >= 0 && o.beta2 < 1, name, "beta2", "in [0, 1)", o.beta2);
  check_option(std::isfinite(o.eps) && o.eps > 0, name, "eps", "finite and > 0", o.eps);
  check_option(std::isfinite(o.weight_decay) && o.weight_decay >= 0, name, "weight_decay", "finite and >= 0",
               o.weight_decay);
  exp_avg_ = add_state("exp_avg");
  exp_avg_sq_ = add_state("exp_avg_sq");
}

AdamW::AdamW(NamedParameters params, const AdamWOptions& o)
    : Adam("AdamW", std::move(params), AdamOptions{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay}, true) {}

namespace {

enum class Decay { none, l2, decoupled };

// The coefficients of one update in the parameter's dtype (PyTorch also rounds them to it).
template <class T>
struct AdamCoefficients {
  T beta1, one_minus_beta1, beta2, one_minus_beta2;
  T step_size;   // lr / (1 − β1^t)
  T bias2_sqrt;  // √(1 − β2^t)
  T eps;
  T weight_decay;  // l2: g += wd·p
  T shrink;        // decoupled: p *= 1 − lr·wd
};

// One Adam(W) update.   p, g, m, v: (n)
template <Decay kDecay, class T>
void adam_kernel(const AdamCoefficients<T>& c, int64_t n, T* p, const T* g, T* m, T* v) {
  for (int64_t k = 0; k < n; ++k) {
    T gk = g[k];
    if constexpr (kDecay == Decay::l2) gk += c.weight_decay * p[k];
    T pk = p[k];
    if constexpr (kDecay == Decay::decoupled) pk *= c.shrink;
    const T mk = c.beta1 * m[k] + c.one_minus_beta1 * gk;
    const T vk = c.beta2 * v[k] + c.one_minus_beta2 * gk * gk;
    m[k] = mk;
    v[k] = vk;
    p[k] = pk - c.step_size * mk / (std::sqrt(vk) / c.bias2_sqrt + c.eps);
  }
}

}  // namespace

void Adam::update(size_t i, const Tensor& grad) {
  const Tensor& p = param(i);
  const double t = static_cast<double>(updates_of(i));
  const AdamOptions& o = options_;
  const double bias1 = 1 - std::pow(o.beta1, t), bias2 = 1 - std::pow(o.beta2, t);
  const Decay decay = o.weight_decay == 0 ? Decay::none : decoupled_ ? Decay::decoupled : Decay::l2;
  dispatch_float(p.dtype(), name(), [&](auto tag) {
    using T = decltype(tag);
    const AdamCoefficients<T> c{
        .beta1 = static_cast<T>(o.beta1),
        .one_minus_beta1 = static_cast<T>(1 - o.beta1),
        .beta2 = static_cast<T>(o.beta2),
        .one_minus_beta2 = static_cast<T>(1 - o.beta2),
        .step_size = static_cast<T>(lr() / bias1),
        .bias2_sqrt = static_cast<T>(std::sqrt(bias2)),
        .eps = static_cast<T>(o.eps),
        .weight_decay = static_cast<T>(o.weight_decay),
        .shrink = static_cast<T>(1 - lr() * o.weight_decay),
    };
    T* w = p.data<T>();
    const T* g = grad.data<T>();
    T* m = exp_avg_[i].data<T>();
    T* v = exp_avg_sq_[i].data<T>();
    // Elements are independent: threads take ranges of them (the same arithmetic as on one thread).
    parallel_for(p.numel(), grain_for_elements(1), [&](int64_t begin, int64_t end) {
      const int64_t n = end - begin;
      switch (decay) {
        case Decay::none: adam_kernel<Decay::none>(c, n, w + begin, g + begin, m + begin, v + begin); break;
        case Decay::l2: adam_kernel<Decay::l2>(c, n, w + begin, g + begin, m + begin, v + begin); break;
        case Decay::decoupled: adam_kernel<Decay::decoupled>(c, n, w + begin, g + begin, m + begin, v + begin); break;
      }
    });
  });
}

}  // namespace tapegrad::optim
