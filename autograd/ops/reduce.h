#pragma once
// Reductions over one dim or all dims, with keepdim: sum, mean, max; argmax (not differentiable).
#include "autograd/tensor.h"

namespace tapegrad {

/// Sum of all elements.                x: any -> ()
Tensor sum(const Tensor& x);
/// Sum over one dim.                   x: (..., n, ...) -> (..., [1,] ...)
Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false);
/// Mean of all elements.               x: any -> ()
Tensor mean(const Tensor& x);
/// Mean over one dim.                  x: (..., n, ...) -> (..., [1,] ...)
Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false);
/// Largest element (the gradient goes to its first occurrence).   x: any -> ()
Tensor max(const Tensor& x);
/// Largest along one dim (gradient to the first maximal index).   x: (..., n, ...) -> (..., [1,] ...)
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
/// Index of the largest along one dim, as int64 (first on ties); not differentiable.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace tapegrad
