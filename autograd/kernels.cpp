// The non-template kernels of kernels.h: dtype checks, zero-filling and writing into gradient buffers.
#include "autograd/kernels.h"

#include <cstring>

namespace tapegrad {

namespace {
/// Address of t's first element.
void* base_of(const Tensor& t) {
  return static_cast<char*>(t.storage()->data) + t.offset() * static_cast<int64_t>(itemsize(t.dtype()));
}
}  // namespace

void check_same_float(const Tensor& a, const Tensor& b, const char* op) {
  if (!is_floating(a.dtype()) || a.dtype() != b.dtype())
    throw DTypeError(cat(op, ": operands ", a.shape(), " ", dtype_name(a.dtype()), " and ", b.shape(), " ",
                         dtype_name(b.dtype()), " must share one float dtype (convert one with .to())"));
}

void zero_fill(Tensor& t) {
  if (t.is_contiguous()) {
    if (t.numel()) std::memset(base_of(t), 0, t.numel() * itemsize(t.dtype()));
    return;
  }
  char* base = static_cast<char*>(base_of(t));
  const size_t size = itemsize(t.dtype());
  for_each_row<1>(t.shape(), {t.strides()}, [&](auto off, int64_t n, auto step) {  // row by row
    if (step[0] == 1) {
      std::memset(base + off[0] * size, 0, n * size);
    } else {
      for (int64_t k = 0; k < n; ++k) std::memset(base + (off[0] + k * step[0]) * size, 0, size);
    }
  });
}

namespace {

/// dst (+)= s · src for one float type (`kScaled` false: s is 1 and not applied), over `shape` with the
/// operands read through these (broadcast) strides.
template <class T, bool kAssign, bool kScaled>
void write_rows(T* pd, const T* ps, T s, const Shape& shape, const Shape& dst_strides, const Shape& src_strides) {
  auto value = [s](T v) {
    if constexpr (kScaled) return s * v;
    else return v;
  };
  for_each_row<2>(shape, {dst_strides, src_strides}, [&](auto off, int64_t n, auto step) {
    T* d = pd + off[0];
    const T* x = ps + off[1];
    if (step[0] == 1 && step[1] == 1) {
      for (int64_t k = 0; k < n; ++k) {
        if constexpr (kAssign) d[k] = value(x[k]);
        else d[k] += value(x[k]);
      }
    } else {
      for (int64_t k = 0; k < n; ++k) {
        if constexpr (kAssign) d[k * step[0]] = value(x[k * step[1]]);
        else d[k * step[0]] += value(x[k * step[1]]);
      }
    }
  });
}

template <class T, bool kScaled>
void write_into_typed(Tensor& dst, bool assign, const Tensor& src, T s, const Shape& shape) {
  T* pd = dst.data<T>();
  const T* ps = src.data<T>();
  if (!assign && dst.is_contiguous() && src.is_contiguous() && src.shape() == shape && dst.numel() > 0 &&
      detail::is_row_of(dst.shape(), shape)) {
    // dst sums src's rows (a bias gradient): d += each row in turn, no per-row index arithmetic
    const int64_t n = dst.numel(), rows = src.numel() / n;
    for (int64_t r = 0; r < rows; ++r) {
      const T* x = ps + r * n;
      for (int64_t k = 0; k < n; ++k) {
        if constexpr (kScaled) pd[k] += s * x[k];
        else pd[k] += x[k];
      }
    }
    return;
  }
  const Shape dst_strides = broadcast_strides(dst, shape), src_strides = broadcast_strides(src, shape);
  if (assign) write_rows<T, true, kScaled>(pd, ps, s, shape, dst_strides, src_strides);
  else write_rows<T, false, kScaled>(pd, ps, s, shape, dst_strides, src_strides);
}

}  // namespace

void write_into(Tensor& dst, bool assign, const Tensor& src, double scale) {
  const Shape shape = broadcast_shapes(dst.shape(), src.shape(), "accumulate");
  if (assign && !(shape == dst.shape())) {  // dst sums over broadcast dims: from zero
    zero_fill(dst);
    assign = false;
  }
  if (assign && scale == 1 && src.dtype() == dst.dtype() && src.shape() == dst.shape() && src.is_contiguous() &&
      dst.is_contiguous() && is_floating(dst.dtype())) {
    if (dst.numel()) std::memcpy(base_of(dst), base_of(src), dst.numel() * itemsize(dst.dtype()));
  } else {
    dispatch_float(dst.dtype(), "accumulate", [&](auto tag) {
      using T = decltype(tag);
      if (scale == 1) write_into_typed<T, false>(dst, assign, src, T(1), shape);
      else write_into_typed<T, true>(dst, assign, src, static_cast<T>(scale), shape);
    });
  }
  ++dst.storage()->version;
}

void accumulate_into(Tensor& dst, const Tensor& src, double scale) { write_into(dst, false, src, scale); }

}  // namespace tapegrad
