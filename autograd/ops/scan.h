#pragma once
// Scans: running sums along one dim (what causal linear attention needs for its prefix states).
#include <cstdint>

#include "autograd/tensor.h"

namespace tapegrad {

/// y_i = Σ_{j≤i} x_j along dim, as torch.cumsum.   x: (..., n, ...) -> same
Tensor cumsum(const Tensor& x, int64_t dim);

}  // namespace tapegrad
