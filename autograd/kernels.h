#pragma once
// Generic strided elementwise kernels that the op families build on. Inputs may be any strided view;
// outputs are fresh contiguous tensors; accumulate_* add into an existing (gradient) buffer.
#include <array>

#include "autograd/iterate.h"
#include "autograd/tensor.h"

namespace tapegrad {

/// Both operands must share one floating dtype; names the op and both dtypes otherwise.
void check_same_float(const Tensor& a, const Tensor& b, const char* op);

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

/// dst += f(u, v) over the broadcast of u and v; dst (a gradient buffer) may have a smaller shape that
/// broadcasts to that space, in which case the broadcast dims are summed into it. Null dst: no-op.
template <class F>
void accumulate_map2(Tensor* dst, const Tensor& u, const Tensor& v, const char* op, F f) {
  if (!dst) return;
  const Shape shape = broadcast_shapes(dst->shape(), broadcast_shapes(u.shape(), v.shape(), op), op);
  dispatch_float(dst->dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    T* pd = dst->data<T>();
    const T *pu = u.data<T>(), *pv = v.data<T>();
    for_each_row<3>(shape, {broadcast_strides(*dst, shape), broadcast_strides(u, shape), broadcast_strides(v, shape)},
                    [&](auto off, int64_t n, auto step) {
                      T* d = pd + off[0];
                      const T *x = pu + off[1], *y = pv + off[2];
                      if (step[0] == 1 && step[1] == 1 && step[2] == 1)
                        for (int64_t k = 0; k < n; ++k) d[k] += f(x[k], y[k]);
                      else
                        for (int64_t k = 0; k < n; ++k) d[k * step[0]] += f(x[k * step[1]], y[k * step[2]]);
                    });
  });
}

/// dst += f(u) elementwise over u's shape (dst broadcasting to it, as in accumulate_map2). Null dst: no-op.
template <class F>
void accumulate_map(Tensor* dst, const Tensor& u, const char* op, F f) {
  accumulate_map2(dst, u, u, op, [&](auto x, auto) { return f(x); });
}

/// dst += scale * src, summing src over the dims where dst broadcasts (and broadcasting src where it
/// does). Not recorded; for gradient buffers and optimizer updates. Counts as an in-place write.
void accumulate_into(Tensor& dst, const Tensor& src, double scale = 1);

}  // namespace tapegrad
