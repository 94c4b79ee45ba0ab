#pragma once
// Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight decay:
// torch.optim.SGD's update rule, element by element (g is the parameter's gradient, p the parameter):
//   g   = g + wd·p                               (when weight_decay != 0)
//   buf = g                                      (first update of p, when momentum != 0)
//   buf = μ·buf + (1 − dampening)·g              (later updates)
//   g   = g + μ·buf  (nesterov)   or   g = buf   (otherwise; when momentum != 0)
//   p   = p − lr·g
// State: "momentum_buffer.<param>" when momentum != 0 (see optimizer.h for the rest).
#include "optim/optimizer.h"

namespace tapegrad::optim {

struct SgdOptions {
  double lr = 1e-3;  // torch.optim.SGD's default since PyTorch 2.2
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
  double weight_decay = 0;
};

class SGD : public Optimizer {
 public:
  /// Validates the options (ValueError naming the option): lr and weight_decay finite and >= 0, momentum
  /// in [0, 1), dampening in [0, 1]; nesterov needs momentum > 0 and dampening 0.
  explicit SGD(NamedParameters params, const SgdOptions& options = {});

  /// The options it was built with (options().lr is the initial rate; lr() is the current one).
  const SgdOptions& options() const { return options_; }

 protected:
  void update(size_t i, const Tensor& grad) override;

 private:
  SgdOptions options_;
  std::vector<Tensor> momentum_buffer_;  // empty when momentum == 0
};

}  // namespace tapegrad::optim
