#pragma once
// Numerical gradient checks: central differences against the tape's backward.
// A non-scalar output is reduced with a fixed random cotangent r, loss = sum(out ⊙ r), never a plain sum:
// softmax rows sum to 1 and LayerNorm rows to 0, so a plain sum has zero gradient and would pass a wrong
// backward.
#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace tapegrad {

struct GradcheckOptions {
  double eps = 1e-6;   // central-difference step
  double atol = 1e-7;  // pass when |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-5;
  uint64_t seed = 20261121;  // of the cotangent r (and of generated inputs)
  DType dtype = DType::float64;  // of generated inputs (registry cases)

  /// float64 (the default): the tolerances above.
  static GradcheckOptions float64() { return {}; }
  /// float32: rounding error of order 1e-7 * |value| / eps dominates, so a larger step and
  /// tolerances of 1e-2 are the tightest that pass reliably for correct rules at unit-scale inputs.
  static GradcheckOptions float32() { return {1e-3, 1e-2, 1e-2, 20261121, DType::float32}; }
};

struct InputReport {
  std::string name;
  double max_abs_error = 0;  // max over elements of |analytic - numeric|
  double max_rel_error = 0;  // max of |analytic - numeric| / max(|analytic|, |numeric|), over elements
                             // where that denominator exceeds 1e-6
  int64_t worst_element = -1;
  bool passed = true;
};

struct GradcheckResult {
  bool passed = true;
  std::vector<InputReport> inputs;   // one per input that requires grad
  std::vector<std::string> ops_seen;  // node kinds the checked function recorded on the tape
  double max_abs_error() const;
  double max_rel_error() const;
  /// One line per input: name, worst errors, pass/fail.
  std::string str() const;
};

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

/// Checks the tape's gradient of f at `inputs` for every element of every input that requires grad.
/// The inputs must be contiguous leaves; they are perturbed in place and restored, so a module's own
/// parameters can be passed (f then ignores its argument and calls the module). Their .grad is reset.
GradcheckResult gradcheck(const TensorFn& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {}, const std::vector<std::string>& names = {});

/// d f(x) / d x by central differences: shape [f(x).numel(), x.numel()], in x's dtype.
Tensor numerical_jacobian(const std::function<Tensor(const Tensor&)>& f, const Tensor& x, double eps = 1e-6);

}  // namespace tapegrad
