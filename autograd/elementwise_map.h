#pragma once
// The strided elementwise maps that the op families build on: map (y = f(x)), map2 (f(a, b) with NumPy
// broadcasting), add_map2 (dx += f(u, v), a backward's elementwise rule) and write_into / accumulate_into
// (dst += scale · src, summed over broadcast dims: gradient buffers). Inputs may be any strided view;
// outputs are new contiguous tensors. The tuned row kernels of single ops are in autograd/kernels/.
#include <array>
#include <type_traits>

#include "autograd/iterate.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"

namespace tapegrad {

/// Both operands must share one floating dtype; names the op and both dtypes otherwise.
void check_same_float(const Tensor& a, const Tensor& b, const char* op);

namespace detail {
/// True when `row` is `shape` without some leading dims (leading 1s of row aside): a contiguous tensor of
/// `shape` is then a sequence of rows each laid out like `row`.
inline bool is_row_of(const Shape& row, const Shape& shape) {
  int i = 0;
  while (i < row.rank() && row[i] == 1) ++i;
  const int drop = shape.rank() - (row.rank() - i);
  if (drop < 0) return false;
  for (int k = i; k < row.rank(); ++k)
    if (row[k] != shape[drop + (k - i)]) return false;
  return true;
}
}  // namespace detail

/// y = f(x) elementwise; y contiguous, same shape and dtype as x.
template <class F>
Tensor map(const Tensor& x, const char* op, F f) {
  Tensor y = empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    parallel_for_each_row<2>(x.shape(), {y.strides(), x.strides()}, [&](auto off, int64_t n, auto step) {
      T* o = out + off[0];
      const T* i = in + off[1];
      if (step[1] == 1)
        for (int64_t k = 0; k < n; ++k) o[k] = f(i[k]);
      else
        for (int64_t k = 0; k < n; ++k) o[k] = f(i[k * step[1]]);
    });
  });
  return y;
}

/// out = f(a, b) with NumPy broadcasting; out contiguous of the broadcast shape.
template <class F>
Tensor map2(const Tensor& a, const Tensor& b, const char* op, F f) {
  check_same_float(a, b, op);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = empty(shape, a.dtype());
  dispatch_float(a.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T *pa = a.data<T>(), *pb = b.data<T>();
    T* po = out.data<T>();
    // x + bias: a contiguous of the out shape, b contiguous along its trailing dims. Row by row with no
    // index arithmetic (the general walk below pays for each short row).
    if (a.shape() == shape && a.is_contiguous() && b.is_contiguous() && b.numel() > 0 &&
        b.numel() < out.numel() && detail::is_row_of(b.shape(), shape)) {
      const int64_t n = b.numel(), rows = out.numel() / n;
      parallel_for(rows, grain_for_elements(n), [&](int64_t first, int64_t last) {
        for (int64_t r = first; r < last; ++r) {
          T* o = po + r * n;
          const T* x = pa + r * n;
          for (int64_t k = 0; k < n; ++k) o[k] = f(x[k], pb[k]);
        }
      });
      return;
    }
    parallel_for_each_row<3>(shape, {out.strides(), broadcast_strides(a, shape), broadcast_strides(b, shape)},
                             [&](auto off, int64_t n, auto step) {
                               T* o = po + off[0];
                               const T *x = pa + off[1], *y = pb + off[2];
                               if (step[1] == 1 && step[2] == 1)
                                 for (int64_t k = 0; k < n; ++k) o[k] = f(x[k], y[k]);
                               else
                                 for (int64_t k = 0; k < n; ++k) o[k] = f(x[k * step[1]], y[k * step[2]]);
                             });
  });
  return out;
}

/// dx_k += f(u, v) over the broadcast of u and v; where input k was broadcast (its shape is smaller), the
/// values over those dims are summed into its elements. Nothing when input k needs no gradient.
template <class F>
void add_map2(BackwardContext& ctx, size_t k, const Tensor& u, const Tensor& v, const char* op, F f) {
  if (!ctx.needs_grad(k)) return;
  const Shape& dx_shape = ctx.input_shape(k);
  const Shape shape = broadcast_shapes(dx_shape, broadcast_shapes(u.shape(), v.shape(), op), op);
  const Adds adds = shape == dx_shape ? Adds::each_once : Adds::scattered;
  ctx.add_into(k, [&](auto dx) {
    using T = typename decltype(dx)::value_type;
    const T *pu = u.data<T>(), *pv = v.data<T>();
    const auto rows = [&](auto off, int64_t n, auto step) {
      auto d = dx + off[0];
      const T *x = pu + off[1], *y = pv + off[2];
      if (step[0] == 1 && step[1] == 1 && step[2] == 1) {
        for (int64_t i = 0; i < n; ++i) d[i] += f(x[i], y[i]);
      } else if (step[0] == 1 && step[1] == 1 && step[2] == 0) {  // v constant along the row
        const T y0 = y[0];
        for (int64_t i = 0; i < n; ++i) d[i] += f(x[i], y0);
      } else {
        for (int64_t i = 0; i < n; ++i) d[i * step[0]] += f(x[i * step[1]], y[i * step[2]]);
      }
    };
    const std::array<Shape, 3> strides{broadcast_strides(dx.tensor, shape), broadcast_strides(u, shape),
                                       broadcast_strides(v, shape)};
    if (adds == Adds::each_once) parallel_for_each_row<3>(shape, strides, rows);  // disjoint elements of dx
    else for_each_row<3>(shape, strides, rows);
  }, adds);
}

/// dst += scale * src, summing src over the dims where dst broadcasts (and broadcasting src where it
/// does). Not recorded; for gradient buffers and optimizer updates. Counts as an in-place write.
void accumulate_into(Tensor& dst, const Tensor& src, double scale = 1);
/// dst += scale * src as above, or dst = scale * src when mode is assign (a new gradient buffer, see
/// BackwardContext::add_into), which needs src to cover every element of dst once (dst sums over no
/// dim). Counts as an in-place write.
void write_into(Tensor& dst, GradMode mode, const Tensor& src, double scale = 1);

}  // namespace tapegrad
