#pragma once
// Shape ops. reshape, transpose, permute, slice, squeeze/unsqueeze and expand return views that share
// storage whenever the layout allows (no copy); concat copies; split returns views.
#include <vector>

#include "autograd/tensor.h"

namespace tapegrad {

/// Same elements in a new shape; one dim may be -1 (inferred). A view when strides allow, else a copy.
/// (A Shape holds its dims inline: a reshape in a training step allocates nothing.)
Tensor reshape(const Tensor& x, const Shape& shape);
/// Swaps two dims (a view).                 x: (.., a, .., b, ..) -> (.., b, .., a, ..)
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
/// Reorders dims: out dim i is x dim dims[i] (a view).
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
/// Elements start, start+step, ... < end along dim (a view); start/end clamp like Python slices,
/// negative values count from the end.
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
/// The index-th entry along dim, with that dim removed (a view).
Tensor select(const Tensor& x, int64_t dim, int64_t index);
/// Joins tensors of equal shape except along dim.
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
/// Consecutive pieces of `size` along dim (the last may be smaller), as views.
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim);
/// Removes dim, which must have size 1 (a view).
Tensor squeeze(const Tensor& x, int64_t dim);
/// Inserts a dim of size 1 at position dim in [-(rank+1), rank] (a view).
Tensor unsqueeze(const Tensor& x, int64_t dim);
/// Broadcasts x to shape (a stride-0 view); its gradient sums over the broadcast dims.
Tensor expand(const Tensor& x, const Shape& shape);

}  // namespace tapegrad
