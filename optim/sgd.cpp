#include "optim/sgd.h"

#include <cmath>

namespace tapegrad::optim {

namespace {

const bool registered = register_optimizer({
    .name = "sgd",
    .help = "stochastic gradient descent with momentum (--momentum) and L2 weight decay",
    .make = [](NamedParameters params, const Hyperparameters& h) -> std::unique_ptr<Optimizer> {
      return std::make_unique<SGD>(std::move(params), SgdOptions{.lr = h.lr, .momentum = h.momentum,
                                                                 .weight_decay = h.weight_decay});
    },
    .uses_momentum = true,
    .state_buffers = 1,  // the momentum buffer (none with momentum 0)
});

}  // namespace

SGD::SGD(NamedParameters params, const SgdOptions& options)
    : Optimizer("SGD", std::move(params), options.lr), options_(options) {
  const SgdOptions& o = options_;
  check_option(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "SGD", "weight_decay", "finite and >= 0",
               o.weight_decay);
  check_option(o.momentum >= 0 && o.momentum < 1, "SGD", "momentum", "in [0, 1)", o.momentum);
  check_option(o.dampening >= 0 && o.dampening <= 1, "SGD", "dampening", "in [0, 1]", o.dampening);
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    throw ValueError(cat("SGD: nesterov requires momentum > 0 and dampening 0, got momentum ", o.momentum,
                         " and dampening ", o.dampening));
  if (o.momentum != 0) momentum_buffer_ = add_state("momentum_buffer");
}

namespace {

// The coefficients of one update in the parameter's dtype (PyTorch also rounds them to it).
template <class T>
struct SgdCoefficients {
  T lr, weight_decay, momentum, one_minus_dampening;
};

// d = g + wd·p: the gradient with L2 decay folded in (kDecay false: d = g, as PyTorch skips wd == 0).
template <bool kDecay, class T>
inline T decayed(T g, T p, T weight_decay) {
  if constexpr (kDecay) return g + weight_decay * p;
  return g;
}

// p −= lr·d, no momentum.   p, g: (n)
template <bool kDecay, class T>
void sgd_plain(const SgdCoefficients<T>& c, int64_t n, T* p, const T* g) {
  for (int64_t k = 0; k < n; ++k) p[k] -= c.lr * decayed<kDecay>(g[k], p[k], c.weight_decay);
}

// With momentum.   p, g, buf: (n)
//   first update: buf = d                 later: buf = μ·buf + (1 − dampening)·d
//   nesterov: p −= lr·(d + μ·buf)         else: p −= lr·buf
template <bool kDecay, bool kNesterov, class T>
void sgd_momentum(const SgdCoefficients<T>& c, bool first, int64_t n, T* p, const T* g, T* buf) {
  if (first) {
    for (int64_t k = 0; k < n; ++k) {
      const T d = decayed<kDecay>(g[k], p[k], c.weight_decay);
      buf[k] = d;
      p[k] -= c.lr * (kNesterov ? d + c.momentum * d : d);
    }
    return;
  }
  for (int64_t k = 0; k < n; ++k) {
    const T d = decayed<kDecay>(g[k], p[k], c.weight_decay);
    buf[k] = c.momentum * buf[k] + c.one_minus_dampening * d;
    p[k] -= c.lr * (kNesterov ? d + c.momentum * buf[k] : buf[k]);
  }
}

template <bool kDecay, class T>
void sgd_dispatch(const SgdCoefficients<T>& c, bool nesterov, bool first, int64_t n, T* p, const T* g, T* buf) {
  if (!buf)
    sgd_plain<kDecay>(c, n, p, g);
  else if (nesterov)
    sgd_momentum<kDecay, true>(c, first, n, p, g, buf);
  else
    sgd_momentum<kDecay, false>(c, first, n, p, g, buf);
}

}  // namespace

void SGD::update(size_t i, const Tensor& grad) {
  const Tensor& p = param(i);
  const bool first = updates_of(i) == 1;
  dispatch_float(p.dtype(), "SGD step", [&](auto tag) {
    using T = decltype(tag);
    const SgdCoefficients<T> c{static_cast<T>(lr()), static_cast<T>(options_.weight_decay),
                               static_cast<T>(options_.momentum), static_cast<T>(1 - options_.dampening)};
    T* buf = momentum_buffer_.empty() ? nullptr : momentum_buffer_[i].data<T>();
    if (options_.weight_decay != 0)
      sgd_dispatch<true>(c, options_.nesterov, first, p.numel(), p.data<T>(), grad.data<T>(), buf);
    else
      sgd_dispatch<false>(c, options_.nesterov, first, p.numel(), p.data<T>(), grad.data<T>(), buf);
  });
}

}  // namespace tapegrad::optim
