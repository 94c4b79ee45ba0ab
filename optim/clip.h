#pragma once
// Gradient clipping by the global L2 norm, as torch.nn.utils.clip_grad_norm_:
//   total = √(Σ over every defined grad, every element, of g²)      (accumulated in double)
//   coef  = max_norm / (total + 1e-6)
//   if coef < 1: g = g·coef for every grad                          (so the new total is just under max_norm)
// PyTorch multiplies by min(coef, 1), which is the same. A non-finite total (an inf or NaN gradient) is
// returned and the grads are left alone, so the caller can see it and skip the step.
#include "optim/optimizer.h"

namespace tapegrad::optim {

/// L2 norm of all defined grads together, accumulated in double (parameters without a grad are skipped).
double grad_norm(const NamedParameters& params);

/// Scales every defined grad in place so that their global L2 norm is at most max_norm (formula above);
/// returns the norm before clipping. ValueError unless max_norm > 0.
double clip_grad_norm(const NamedParameters& params, double max_norm);

}  // namespace tapegrad::optim
