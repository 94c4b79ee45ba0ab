// Reductions over all elements or over one dim.   x: (..., n, ...) -> out: (..., [1,] ...)
// A reduction over dim d walks "lanes": for every index of the other dims, the n elements along d. Lanes
// are read through x's strides (any view works); the output is contiguous in the keepdim shape, which has
// the same layout as the shape without d.
#include "autograd/ops/reduce.h"

#include <cmath>

#include "autograd/elementwise_map.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/views.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

namespace {

/// x's shape with dim d set to 1 (keepdim) or removed.
Shape reduced_shape(const Shape& shape, int d, bool keepdim) {
  Shape out = shape;
  if (keepdim)
    out[d] = 1;
  else
    out.erase(d);
  return out;
}

/// Calls body(first, out_index) once per lane of a tensor of `shape` and `strides` along dim d: `first` is
/// the offset (in elements) of the lane's first element, `out_index` the lane's position in a contiguous
/// tensor of the reduced shape. The lane's elements sit at first + i * strides[d] for i in [0, shape[d]).
/// `across_threads` splits the lanes across tapegrad's threads, whole lanes to each (so every lane is
/// reduced in the same order whatever the thread count): only for bodies that write their own lane's
/// outputs alone.
template <class Body>
void for_each_lane(const Shape& shape, const Shape& strides, int d, Body&& body, bool across_threads = false) {
  Shape outer = shape;
  outer[d] = 1;
  if (outer.numel() == 0) return;
  const detail::RowSpace<2> space = detail::merge_dims<2>(outer, {strides, contiguous_strides(outer)});
  auto lanes = [&](auto off, int64_t n, auto step) {
    for (int64_t k = 0; k < n; ++k) body(off[0] + k * step[0], off[1] + k * step[1]);
  };
  if (!across_threads) return detail::walk_rows(space, 0, space.rows(), lanes);
  // A row of lanes costs its lanes' elements, not its own length.
  const int64_t grain = grain_for_elements(space.row_length() * shape[d]);
  parallel_for(space.rows(), grain, [&](int64_t first, int64_t last) { detail::walk_rows(space, first, last, lanes); });
}

/// Sum of every element of x (d < 0) or of each lane along d, times scale, written to a new tensor of the
/// reduced shape. Accumulates in double, so that float32 sums of long rows do not drift.
Tensor sum_scaled(const Tensor& x, int d, bool keepdim, double scale, const char* op) {
  return dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    if (d < 0) {  // every element
      double total = 0;
      for_each_row<1>(x.shape(), {x.strides()}, [&](auto off, int64_t n, auto step) {
        for (int64_t k = 0; k < n; ++k) total += in[off[0] + k * step[0]];
      });
      return full({}, total * scale, x.dtype());
    }
    Tensor out = empty(reduced_shape(x.shape(), d, keepdim), x.dtype());
    T* po = out.data<T>();
    const int64_t n = x.shape()[d], stride = x.strides()[d];
    for_each_lane(x.shape(), x.strides(), d, [&](int64_t first, int64_t at) {
      double total = 0;
      for (int64_t i = 0; i < n; ++i) total += in[first + i * stride];
      po[at] = static_cast<T>(total * scale);
    }, /*across_threads=*/true);
    return out;
  });
}

/// True when v should replace the running maximum best: strictly larger (so the first of tied maxima
/// stays), or the first NaN (which then sticks, so a NaN anywhere makes the max NaN, as in PyTorch).
template <class T>
bool beats(T v, T best) {
  return v > best || (std::isnan(v) && !std::isnan(best));
}

/// Largest element of each lane along d and the index of its first occurrence; either output may be null.
void max_along(const Tensor& x, int d, Tensor* values, Tensor* indices, const char* op) {
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* pv = values ? values->data<T>() : nullptr;
    int64_t* pi = indices ? indices->data<int64_t>() : nullptr;
    const int64_t n = x.shape()[d], stride = x.strides()[d];
    for_each_lane(x.shape(), x.strides(), d, [&](int64_t first, int64_t at) {
      T best = in[first];
      int64_t where = 0;
      for (int64_t i = 1; i < n; ++i) {
        const T v = in[first + i * stride];
        if (beats(v, best)) {
          best = v;
          where = i;
        }
      }
      if (pv) pv[at] = best;
      if (pi) pi[at] = where;
    }, /*across_threads=*/true);
  });
}

/// Reductions take float tensors only; names op, shape and dtype otherwise.
void require_float(const Tensor& x, const char* op) {
  if (!is_floating(x.dtype()))
    throw DTypeError(cat(op, ": x ", x.shape(), " is ", dtype_name(x.dtype()), "; expected float32 or float64"));
}

/// Refuses a reduction that has no value over an empty dim (mean, max, argmax); names op and shape.
void require_nonempty_dim(const Tensor& x, int d, int64_t dim, const char* op) {
  if (x.shape()[d] == 0)
    throw ShapeError(cat(op, ": dim ", dim, " of shape ", x.shape(), " is empty; there is no ", op, " of no elements"));
}

}  // namespace

// sum.       x: any -> out: () or x: (..., n, ...) -> out: (..., [1,] ...)
// forward : out = sum_i x_i               (over every element, or over i along dim d)
// backward: d out / d x_i = 1, so dx = dout broadcast back over the reduced dim (or over all of x)
// saves   : nothing; dim < 0 means "all elements"
struct SumNode : NodeOf<SumNode> {
  static constexpr const char* kName = "sum";
  int dim = -1;
  bool keepdim = false;
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    ctx.accumulate(0, dim < 0 || keepdim ? dout : unsqueeze(dout, dim));
  }
};

Tensor sum(const Tensor& x) {
  require_float(x, "sum");
  Tensor out = sum_scaled(x, -1, false, 1, "sum");
  record<SumNode>(out, x);
  return out;
}

Tensor sum(const Tensor& x, int64_t dim, bool keepdim) {
  require_float(x, "sum");
  const int d = wrap_dim(dim, x.dim(), "sum", x.shape());
  Tensor out = sum_scaled(x, d, keepdim, 1, "sum");
  if (auto* node = record<SumNode>(out, x)) {
    node->dim = d;
    node->keepdim = keepdim;
  }
  return out;
}

// mean.      x: any -> out: () or x: (..., n, ...) -> out: (..., [1,] ...)
// forward : out = (1/n) sum_i x_i         (n = numel(x), or the size of dim d)
// backward: d out / d x_i = 1/n, so dx = dout / n broadcast back over the reduced dim (or all of x)
// saves   : n only; dim < 0 means "all elements"
struct MeanNode : NodeOf<MeanNode> {
  static constexpr const char* kName = "mean";
  int dim = -1;
  bool keepdim = false;
  int64_t n = 1;
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    ctx.accumulate(0, dim < 0 || keepdim ? dout : unsqueeze(dout, dim), 1.0 / static_cast<double>(n));
  }
};

Tensor mean(const Tensor& x) {
  require_float(x, "mean");
  if (x.numel() == 0) throw ShapeError(cat("mean: tensor of shape ", x.shape(), " has no elements to average"));
  const int64_t n = x.numel();
  Tensor out = sum_scaled(x, -1, false, 1.0 / static_cast<double>(n), "mean");
  if (auto* node = record<MeanNode>(out, x)) node->n = n;
  return out;
}

Tensor mean(const Tensor& x, int64_t dim, bool keepdim) {
  require_float(x, "mean");
  const int d = wrap_dim(dim, x.dim(), "mean", x.shape());
  require_nonempty_dim(x, d, dim, "mean");
  const int64_t n = x.shape()[d];
  Tensor out = sum_scaled(x, d, keepdim, 1.0 / static_cast<double>(n), "mean");
  if (auto* node = record<MeanNode>(out, x)) {
    node->dim = d;
    node->keepdim = keepdim;
    node->n = n;
  }
  return out;
}

// max.       x: any -> out: (), the largest element; its first occurrence (row-major) is x_k
// forward : out = x_k
// backward: d out / d x_i = [i = k], so dx_k += dout and every other dx_i is untouched; tied maxima
//           other than the first get nothing (a subgradient, as PyTorch's max with indices does)
// saves   : k, the row-major index of the first maximum
struct MaxAllNode : NodeOf<MaxAllNode> {
  static constexpr const char* kName = "max";
  int64_t index = 0;
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    ctx.add_into(0, [&](auto dx) {  // dx is contiguous: row-major index = offset
      using T = typename decltype(dx)::value_type;
      dx[index] += dout.data<T>()[0];
    }, Adds::scattered);
  }
};

Tensor max(const Tensor& x) {
  require_float(x, "max");
  if (x.numel() == 0)
    throw ShapeError(cat("max: tensor of shape ", x.shape(), " is empty; there is no max of no elements"));
  Tensor out;
  int64_t index = 0;
  dispatch_float(x.dtype(), "max", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T best = in[0];  // offset 0 of a view is its row-major first element
    // Walk x alongside the contiguous strides of its shape, which turn each element into its row-major index.
    for_each_row<2>(x.shape(), {x.strides(), contiguous_strides(x.shape())}, [&](auto off, int64_t n, auto step) {
      for (int64_t k = 0; k < n; ++k) {
        const T v = in[off[0] + k * step[0]];
        if (beats(v, best)) {
          best = v;
          index = off[1] + k * step[1];
        }
      }
    });
    out = full({}, static_cast<double>(best), x.dtype());
  });
  if (auto* node = record<MaxAllNode>(out, x)) node->index = index;
  return out;
}

// max over dim d.   x: (..., n, ...) -> out: (..., [1,] ...); per lane, k = first index of the maximum
// forward : out = x[..., k, ...]
// backward: dx[..., k, ...] += dout[...] for each lane (the one-hot Jacobian row of each lane)
// saves   : k per lane, as int64 in the contiguous reduced layout
struct MaxDimNode : NodeOf<MaxDimNode> {
  static constexpr const char* kName = "max_dim";
  int dim = 0;
  Tensor indices;  // private to the node: nothing else can write it
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    const int64_t* k = indices.data<int64_t>();
    ctx.add_into(0, [&](auto dx) {
      using T = typename decltype(dx)::value_type;
      const Tensor& buffer = dx.tensor;
      const int64_t stride = buffer.strides()[dim];
      const T* g = dout.data<T>();
      for_each_lane(buffer.shape(), buffer.strides(), dim,
                    [&](int64_t first, int64_t at) { dx[first + k[at] * stride] += g[at]; });
    }, Adds::scattered);
  }
};

Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  require_float(x, "max");
  const int d = wrap_dim(dim, x.dim(), "max", x.shape());
  require_nonempty_dim(x, d, dim, "max");
  const Shape shape = reduced_shape(x.shape(), d, keepdim);
  Tensor out = empty(shape, x.dtype()), indices = empty(shape, DType::int64);
  max_along(x, d, &out, &indices, "max");
  if (auto* node = record<MaxDimNode>(out, x)) {
    node->dim = d;
    node->indices = indices;
  }
  return out;
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  require_float(x, "argmax");
  const int d = wrap_dim(dim, x.dim(), "argmax", x.shape());
  require_nonempty_dim(x, d, dim, "argmax");
  Tensor indices = empty(reduced_shape(x.shape(), d, keepdim), DType::int64);
  max_along(x, d, nullptr, &indices, "argmax");
  return indices;  // int64: never recorded, argmax has no gradient
}

namespace {
using K = InputSpec::Kind;
const bool registered = register_gradchecks({
    op_case("reduce/sum/all", {{{2, 3, 4}}}, [](auto& in) { return sum(in[0]); }),
    op_case("reduce/sum/dim-keepdim", {{{2, 3, 4}}}, [](auto& in) { return sum(in[0], 1, true); }),
    op_case("reduce/sum/negative-dim", {{{3, 5}}}, [](auto& in) { return sum(in[0], -1); }),
    op_case("reduce/sum/transposed", {{{3, 4, 2}}}, [](auto& in) { return sum(transpose(in[0], 0, 2), 1); }),
    op_case("reduce/mean/all", {{{4, 3}}}, [](auto& in) { return mean(in[0]); }),
    op_case("reduce/mean/dim", {{{4, 3, 2}}}, [](auto& in) { return mean(in[0], -2); }),
    // keepdim output broadcast back against its input: centring a row, as LayerNorm does.
    op_case("reduce/mean/keepdim-broadcast", {{{2, 3, 5}}}, [](auto& in) { return in[0] - mean(in[0], -1, true); }),
    op_case("reduce/max/all", {{{3, 4}, K::apart}}, [](auto& in) { return max(in[0]); }),
    op_case("reduce/max/all-transposed", {{{3, 4}, K::apart}}, [](auto& in) { return max(transpose(in[0], 0, 1)); }),
    op_case("reduce/max/dim-keepdim", {{{3, 5, 2}, K::apart}}, [](auto& in) { return max(in[0], 1, true); }),
    op_case("reduce/max/negative-dim", {{{2, 3, 4}, K::apart}}, [](auto& in) { return max(in[0], -1); }),
    op_case("reduce/max/dim-of-transposed", {{{4, 3}, K::apart}},
            [](auto& in) { return max(transpose(in[0], 0, 1), 0); }),
});
}  // namespace

}  // namespace tapegrad
