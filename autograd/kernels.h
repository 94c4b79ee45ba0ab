#pragma once
// Generic strided elementwise kernels that the op families build on. Inputs may be any strided view;
// outputs are fresh contiguous tensors; accumulate_* add into an existing (gradient) buffer.
#include <array>
#include <type_traits>

#include "autograd/iterate.h"
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

/// Sets every element of a float tensor to 0 (not recorded, not counted as a write: for fresh buffers).
void zero_fill(Tensor& t);

/// y = f(x) elementwise; y contiguous, same shape and dtype as x.
template <class F>
Tensor map(const Tensor& x, const char* op, F f) {
  Tensor y = empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for_each_row<2>(x.shape(), {y.strides(), x.strides()}, [&](auto off, int64_t n, auto step) {
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
      for (int64_t r = 0; r < rows; ++r) {
        T* o = po + r * n;
        const T* x = pa + r * n;
        for (int64_t k = 0; k < n; ++k) o[k] = f(x[k], pb[k]);
      }
      return;
    }
    for_each_row<3>(shape, {out.strides(), broadcast_strides(a, shape), broadcast_strides(b, shape)},
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

/// dst += f(u, v) over the broadcast of u and v, or dst = f(u, v) when `assign` (a fresh gradient buffer,
/// see BackwardContext::grad(k, fresh)). dst may have a smaller shape that broadcasts to that space, in
/// which case the broadcast dims are summed into it (a summing dst is zero-filled first when `assign`).
/// Null dst: no-op.
template <class F>
void write_map2(Tensor* dst, bool assign, const Tensor& u, const Tensor& v, const char* op, F f) {
  if (!dst) return;
  const Shape shape = broadcast_shapes(dst->shape(), broadcast_shapes(u.shape(), v.shape(), op), op);
  if (assign && !(shape == dst->shape())) {  // several products land in one element: sum from zero
    assign = false;
    zero_fill(*dst);
  }
  dispatch_float(dst->dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    T* pd = dst->data<T>();
    const T *pu = u.data<T>(), *pv = v.data<T>();
    auto rows = [&](auto assign_tag) {
      constexpr bool kAssign = decltype(assign_tag)::value;
      for_each_row<3>(shape, {broadcast_strides(*dst, shape), broadcast_strides(u, shape), broadcast_strides(v, shape)},
                      [&](auto off, int64_t n, auto step) {
                        T* d = pd + off[0];
                        const T *x = pu + off[1], *y = pv + off[2];
                        if (step[0] == 1 && step[1] == 1 && step[2] == 1) {
                          for (int64_t k = 0; k < n; ++k) {
                            if constexpr (kAssign) d[k] = f(x[k], y[k]);
                            else d[k] += f(x[k], y[k]);
                          }
                        } else if (step[0] == 1 && step[1] == 1 && step[2] == 0) {  // v constant along the row
                          const T y0 = y[0];
                          for (int64_t k = 0; k < n; ++k) {
                            if constexpr (kAssign) d[k] = f(x[k], y0);
                            else d[k] += f(x[k], y0);
                          }
                        } else {
                          for (int64_t k = 0; k < n; ++k) {
                            if constexpr (kAssign) d[k * step[0]] = f(x[k * step[1]], y[k * step[2]]);
                            else d[k * step[0]] += f(x[k * step[1]], y[k * step[2]]);
                          }
                        }
                      });
    };
    if (assign) rows(std::true_type{});
    else rows(std::false_type{});
  });
}

/// dst += f(u, v) over the broadcast of u and v; dst (a gradient buffer) may have a smaller shape that
/// broadcasts to that space, in which case the broadcast dims are summed into it. Null dst: no-op.
template <class F>
void accumulate_map2(Tensor* dst, const Tensor& u, const Tensor& v, const char* op, F f) {
  write_map2(dst, false, u, v, op, f);
}

/// dst += f(u) elementwise over u's shape (dst broadcasting to it, as in accumulate_map2). Null dst: no-op.
template <class F>
void accumulate_map(Tensor* dst, const Tensor& u, const char* op, F f) {
  accumulate_map2(dst, u, u, op, [&](auto x, auto) { return f(x); });
}

/// dst += scale * src, summing src over the dims where dst broadcasts (and broadcasting src where it
/// does). Not recorded; for gradient buffers and optimizer updates. Counts as an in-place write.
void accumulate_into(Tensor& dst, const Tensor& src, double scale = 1);
/// accumulate_into, or dst = scale * src when `assign` (a fresh gradient buffer; a dst that sums over
/// broadcast dims is zero-filled first). Counts as an in-place write.
void write_into(Tensor& dst, bool assign, const Tensor& src, double scale = 1);

}  // namespace tapegrad
