// Shape ops: views that share storage, and concat. Each backward routes dout back into the input's
// layout; the gradient buffer is contiguous, so a view's backward writes through the same view of it.
#include "autograd/ops/views.h"

#include <algorithm>
#include <optional>

#include "autograd/elementwise_map.h"
#include "autograd/pool.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

namespace {

Tensor make_view(const Tensor& x, const Shape& shape, const Shape& strides, int64_t offset) {
  auto impl = make_pooled<TensorImpl>();
  impl->storage = x.storage();
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = x.dtype();
  return Tensor(std::move(impl));
}

/// Strides that view x's elements in `shape` without a copy, when they exist (the algorithm of
/// PyTorch's computeStride: dims of x that are contiguous with each other form chunks, and each chunk
/// must split exactly into consecutive dims of the new shape).
std::optional<Shape> view_strides(const Tensor& x, const Shape& shape) {
  if (x.numel() == 0 || x.dim() == 0 || x.is_contiguous()) return contiguous_strides(shape);
  Shape strides = shape;
  int view_d = shape.rank() - 1;
  int64_t chunk_stride = x.strides()[x.dim() - 1], tensor_numel = 1, view_numel = 1;
  for (int d = x.dim() - 1; d >= 0; --d) {
    tensor_numel *= x.shape()[d];
    if (d == 0 || (x.shape()[d - 1] != 1 && x.strides()[d - 1] != tensor_numel * chunk_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_stride = x.strides()[d - 1];
        tensor_numel = view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

/// The same data as dy (contiguous) in shape `shape`.
Tensor reshaped(const Tensor& dy, const Shape& shape) { return make_view(dy, shape, contiguous_strides(shape), dy.offset()); }

}  // namespace

// reshape.   x: any -> y: same elements, new shape
// backward : dx = reshape(dy, x.shape)
struct ReshapeNode : NodeOf<ReshapeNode> {
  static constexpr const char* kName = "reshape";
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    if (ctx.needs_grad(0)) ctx.pass_through(0, reshaped(dy, inputs[0].shape));
  }
};

Tensor reshape(const Tensor& x, const Shape& dims) {
  Shape shape;
  int inferred = -1;
  int64_t known = 1;
  for (int i = 0; i < dims.rank(); ++i) {
    if (dims[i] == -1) {
      if (inferred >= 0) throw ShapeError(cat("reshape: ", x.shape(), " -> ", dims, ": more than one -1"));
      inferred = i;
    } else if (dims[i] < 0) {
      throw ShapeError(cat("reshape: ", x.shape(), " -> ", dims, ": negative dim"));
    } else {
      known *= dims[i];
    }
    shape.push_back(dims[i]);
  }
  if (inferred >= 0) {
    if (known == 0 || x.numel() % known != 0)
      throw ShapeError(cat("reshape: ", x.shape(), " -> ", dims, ": cannot infer the -1 dim from ", x.numel(),
                           " elements"));
    shape[inferred] = x.numel() / known;
  }
  if (shape.numel() != x.numel())
    throw ShapeError(cat("reshape: ", x.shape(), " (", x.numel(), " elements) -> ", shape, " (", shape.numel(),
                         " elements)"));
  Tensor y;
  if (auto strides = view_strides(x, shape)) {
    y = make_view(x, shape, *strides, x.offset());
  } else {
    const Tensor copy = x.detach().clone();
    y = make_view(copy, shape, contiguous_strides(shape), 0);
  }
  record<ReshapeNode>(y, x);
  return y;
}

// permute.   x: dims d_0..d_{r-1} -> y: out dim i is x dim dims[i] (a view)
// backward : dx = permute(dy, inverse(dims))
struct PermuteNode : NodeOf<PermuteNode> {
  static constexpr const char* kName = "permute";
  Shape dims;  // wrapped (a Shape holds its dims inline: recording allocates nothing)
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    if (!ctx.needs_grad(0)) return;
    Shape shape = inputs[0].shape, strides = inputs[0].shape;
    for (int i = 0; i < dims.rank(); ++i) strides[static_cast<int>(dims[i])] = dy.strides()[i];
    ctx.accumulate(0, make_view(dy, shape, strides, dy.offset()));
  }
};

namespace {
/// permute with its dims (one per dim of x) in a Shape.
Tensor permuted(const Tensor& x, const Shape& dims) {
  bool used[kMaxRank] = {};
  Shape wrapped, shape, strides;
  for (int i = 0; i < dims.rank(); ++i) {
    const int w = wrap_dim(dims[i], x.dim(), "permute", x.shape());
    if (used[w]) throw ShapeError(cat("permute: dim ", dims[i], " repeated for shape ", x.shape()));
    used[w] = true;
    wrapped.push_back(w);
    shape.push_back(x.shape()[w]);
    strides.push_back(x.strides()[w]);
  }
  Tensor y = make_view(x, shape, strides, x.offset());
  if (auto* node = record<PermuteNode>(y, x)) node->dims = wrapped;
  return y;
}
}  // namespace

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  if (static_cast<int>(dims.size()) != x.dim())
    throw ShapeError(cat("permute: ", dims.size(), " dims given for a tensor of shape ", x.shape()));
  return permuted(x, Shape(dims));
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  Shape dims;
  for (int i = 0; i < x.dim(); ++i) dims.push_back(i);
  std::swap(dims[wrap_dim(dim0, x.dim(), "transpose", x.shape())], dims[wrap_dim(dim1, x.dim(), "transpose", x.shape())]);
  return permuted(x, dims);
}

// slice.     x: (.., n, ..) -> y: (.., m, ..), y[.., i, ..] = x[.., start + i·step, ..] (a view)
// backward : dx[.., start + i·step, ..] += dy[.., i, ..]    (written through the same view of dx)
struct SliceNode : NodeOf<SliceNode> {
  static constexpr const char* kName = "slice";
  int dim = 0;
  int64_t start = 0, step = 1;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    ctx.add_into(0, [&](auto dx) {  // dx is zero outside the window, so it is filled first: scattered
      const Tensor& buffer = dx.tensor;
      Shape strides = buffer.strides();
      strides[dim] *= step;
      Tensor window = make_view(buffer, dy.shape(), strides, buffer.offset() + start * buffer.strides()[dim]);
      accumulate_into(window, dy);
    }, Adds::scattered);
  }
};

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  const int d = wrap_dim(dim, x.dim(), "slice", x.shape());
  if (step <= 0) throw ValueError(cat("slice: step must be positive, got ", step));
  const int64_t n = x.shape()[d];
  auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  Shape shape = x.shape(), strides = x.strides();
  shape[d] = (end - start + step - 1) / step;
  strides[d] *= step;
  Tensor y = make_view(x, shape, strides, x.offset() + start * x.strides()[d]);
  if (auto* node = record<SliceNode>(y, x)) {
    node->dim = d;
    node->start = start;
    node->step = step;
  }
  return y;
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  const int d = wrap_dim(dim, x.dim(), "select", x.shape());
  const int64_t n = x.shape()[d];
  if (index < -n || index >= n)
    throw ShapeError(cat("select: index ", index, " is out of range for dim ", dim, " of shape ", x.shape()));
  if (index < 0) index += n;
  return squeeze(slice(x, d, index, index + 1), d);
}

// concat.    xs_k: (.., n_k, ..) -> y: (.., sum_k n_k, ..)
// backward : dxs_k = dy[.., offset_k : offset_k + n_k, ..]
struct ConcatNode : NodeOf<ConcatNode> {
  static constexpr const char* kName = "concat";
  int dim = 0;
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    int64_t offset = 0;
    for (size_t k = 0; k < inputs.size(); ++k) {
      const int64_t n = inputs[k].shape[dim];
      if (ctx.needs_grad(k)) ctx.accumulate(k, slice(dy, dim, offset, offset + n));
      offset += n;
    }
  }
};

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  if (xs.empty()) throw ShapeError("concat: no tensors given");
  const Tensor& first = xs[0];
  const int d = wrap_dim(dim, first.dim(), "concat", first.shape());
  Shape shape = first.shape();
  shape[d] = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    const Tensor& x = xs[k];
    bool fits = x.dim() == first.dim() && x.dtype() == first.dtype();
    for (int i = 0; fits && i < x.dim(); ++i) fits = i == d || x.shape()[i] == first.shape()[i];
    if (!fits)
      throw ShapeError(cat("concat: tensor ", k, " ", x.shape(), " ", dtype_name(x.dtype()), " does not match tensor 0 ",
                           first.shape(), " ", dtype_name(first.dtype()), " outside dim ", dim));
    shape[d] += x.shape()[d];
  }
  Tensor y = empty(shape, first.dtype());
  {
    NoGradGuard no_grad;
    int64_t offset = 0;
    for (const Tensor& x : xs) {
      slice(y, d, offset, offset + x.shape()[d]).copy_(x);
      offset += x.shape()[d];
    }
  }
  if (auto* node = record_list<ConcatNode>(y, xs)) node->dim = d;
  return y;
}

std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim) {
  const int d = wrap_dim(dim, x.dim(), "split", x.shape());
  if (size <= 0) throw ValueError(cat("split: size must be positive, got ", size));
  std::vector<Tensor> pieces;
  for (int64_t start = 0; start < x.shape()[d]; start += size) pieces.push_back(slice(x, d, start, start + size));
  return pieces;
}

// squeeze / unsqueeze / expand.   views that change only the shape metadata
// backward : dx = reshape(dy, x.shape), summed over expanded dims for expand
struct RestrideNode : NodeOf<RestrideNode> {
  static constexpr const char* kName = "restride";
  void backward(const Tensor& dy, BackwardContext& ctx) override {
    if (!ctx.needs_grad(0)) return;
    const Shape& shape = inputs[0].shape;
    if (dy.numel() == shape.numel()) ctx.pass_through(0, reshaped(dy, shape));
    else ctx.accumulate(0, dy);  // expand: dx broadcasts to dy, so the expanded dims are summed
  }
};

Tensor squeeze(const Tensor& x, int64_t dim) {
  const int d = wrap_dim(dim, x.dim(), "squeeze", x.shape());
  if (x.shape()[d] != 1) throw ShapeError(cat("squeeze: dim ", dim, " of shape ", x.shape(), " is not 1"));
  Shape shape = x.shape(), strides = x.strides();
  shape.erase(d);
  strides.erase(d);
  Tensor y = make_view(x, shape, strides, x.offset());
  record<RestrideNode>(y, x);
  return y;
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  const int d = wrap_dim(dim, x.dim() + 1, "unsqueeze", x.shape());
  Shape shape = x.shape(), strides = x.strides();
  const int64_t stride = d < x.dim() ? x.strides()[d] * x.shape()[d] : 1;
  shape.insert(d, 1);
  strides.insert(d, stride);
  Tensor y = make_view(x, shape, strides, x.offset());
  record<RestrideNode>(y, x);
  return y;
}

Tensor expand(const Tensor& x, const Shape& shape) {
  if (shape.rank() < x.dim() || !(broadcast_shapes(x.shape(), shape, "expand") == shape))
    throw ShapeError(cat("expand: ", x.shape(), " cannot be broadcast to ", shape));
  Tensor y = make_view(x, shape, broadcast_strides(x, shape), x.offset());
  record<RestrideNode>(y, x);
  return y;
}

namespace {
const bool registered = register_gradchecks({
    op_case("views/reshape", {{{2, 3, 4}}}, [](auto& in) { return reshape(in[0], {4, -1}); }),
    op_case("views/reshape-of-transposed", {{{3, 4}}}, [](auto& in) { return reshape(transpose(in[0], 0, 1), {2, 6}); }),
    op_case("views/transpose", {{{2, 3, 4}}}, [](auto& in) { return transpose(in[0], 0, 2); }),
    op_case("views/permute", {{{2, 3, 4}}}, [](auto& in) { return permute(in[0], {1, 2, 0}); }),
    op_case("views/slice-step", {{{5, 4}}}, [](auto& in) { return slice(in[0], 0, 1, 5, 2); }),
    op_case("views/select", {{{3, 4}}}, [](auto& in) { return select(in[0], 1, -1); }),
    op_case("views/concat", {{{2, 3}}, {{2, 1}}, {{2, 2}}},
            [](auto& in) { return concat({in[0], in[1], in[2]}, 1); }),
    op_case("views/split", {{{5, 3}}}, [](auto& in) { return split(in[0], 2, 0)[2]; }),
    op_case("views/squeeze-unsqueeze", {{{3, 1, 4}}}, [](auto& in) { return unsqueeze(squeeze(in[0], 1), 0); }),
    op_case("views/expand", {{{3, 1}}}, [](auto& in) { return expand(in[0], {2, 3, 4}); }),
});
}  // namespace

}  // namespace tapegrad
