#pragma once
// Adam and AdamW: torch.optim.Adam / torch.optim.AdamW's update rules (amsgrad off), element by element,
// with t the parameter's update count (1 on its first update; "step.<param>" in the state):
//   Adam : g = g + wd·p                                  (L2 penalty, when weight_decay != 0)
//   AdamW: p = p·(1 − lr·wd)                             (decoupled decay, before the moments; g untouched)
//   m = β1·m + (1 − β1)·g
//   v = β2·v + (1 − β2)·g²
//   p = p − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + eps)
// The last line is p −= lr·m̂/(√v̂ + eps) with m̂ = m/(1 − β1^t), v̂ = v/(1 − β2^t), written as PyTorch
// computes it; the bias corrections 1 − β^t are computed in double.
// State: "exp_avg.<param>" (m) and "exp_avg_sq.<param>" (v) (see optimizer.h for the rest).
#include "optim/optimizer.h"

namespace tapegrad::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // L2: added to the gradient
};

/// AdamW's options: Adam's, but weight decay is decoupled and defaults to 0.01 (as torch.optim.AdamW).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // decoupled: p·(1 − lr·wd) each step
};

class Adam : public Optimizer {
 public:
  /// Validates the options (ValueError naming the option): lr and weight_decay finite and >= 0,
  /// beta1 and beta2 in [0, 1), eps finite and > 0.
  explicit Adam(NamedParameters params, const AdamOptions& options = {});

  /// The options it was built with (options().lr is the initial rate; lr() is the current one).
  const AdamOptions& options() const { return options_; }
  /// True for AdamW: weight decay shrinks the parameter instead of adding to the gradient.
  bool decoupled_weight_decay() const { return decoupled_; }

 protected:
  Adam(const char* name, NamedParameters params, const AdamOptions& options, bool decoupled);
  void update(size_t i, const Tensor& grad) override;

 private:
  AdamOptions options_;
  bool decoupled_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;  // m and v, per parameter
};

class AdamW : public Adam {
 public:
  /// Adam with decoupled weight decay (Loshchilov & Hutter); validates as Adam does, naming "AdamW".
  explicit AdamW(NamedParameters params, const AdamWOptions& options = {});
};

}  // namespace tapegrad::optim
