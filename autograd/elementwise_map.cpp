// The non-template parts of elementwise_map.h: dtype checks and writing into gradient buffers.
#include "autograd/elementwise_map.h"

#include <algorithm>
#include <cstring>

#include "autograd/kernels/scratch.h"
#include "autograd/parallel.h"

namespace tapegrad {

void check_same_float(const Tensor& a, const Tensor& b, const char* op) {
  if (!is_floating(a.dtype()) || a.dtype() != b.dtype())
    throw DTypeError(cat(op, ": operands ", a.shape(), " ", dtype_name(a.dtype()), " and ", b.shape(), " ",
                         dtype_name(b.dtype()), " must share one float dtype (convert one with .to())"));
}

namespace {

struct RowSumPartials;  // write_into_typed's partial sums of rows (kernels/scratch.h)

/// dst (+)= s · src for one float type and mode (`kScaled` false: s is 1 and not applied), over `shape`,
/// which src covers and dst broadcasts to.
template <class T, GradMode kMode, bool kScaled>
void write_into_typed(Tensor& dst, const Tensor& src, T s, const Shape& shape) {
  const GradPtr<T, kMode> pd(dst.data<T>());
  const T* ps = src.data<T>();
  auto value = [s](T v) {
    if constexpr (kScaled) return s * v;
    else {
      (void)s;  // captured for the scaled case only
      return v;
    }
  };
  if (dst.is_contiguous() && src.is_contiguous() && src.shape() == shape && dst.numel() > 0 &&
      detail::is_row_of(dst.shape(), shape)) {
    // src is rows laid out like dst (dst sums them: a bias gradient; or one row, dst itself): each row
    // in turn, no per-row index arithmetic.
    const int64_t n = dst.numel(), rows = src.numel() / n;
    const int64_t parts = std::min<int64_t>(num_threads(), rows / grain_for_elements(n));
    if (parts > 1) {
      // Threads take runs of rows, as the row kernels and the products split by rows did: each sums rows its
      // own core's cache holds, into dst (part 0) or a partial row, and the partials add in part order: the
      // sums are regrouped by the thread count, never by timing. (Several rows: dst adds, see write_into.)
      // Threads taking columns read every row, half of them from the other core: `small`'s step ran 0.5-2.5%
      // faster by rows on a Zen 3, switched step chunk by step chunk (docs/performance.md).
      T* partials = scratch<T, RowSumPartials>((parts - 1) * n);
      parallel_for(parts, 1, [&](int64_t first, int64_t last) {
        for (int64_t p = first; p < last; ++p) {
          T* sum = p == 0 ? dst.data<T>() : partials + (p - 1) * n;
          if (p > 0) std::fill(sum, sum + n, T(0));
          for (int64_t r = rows * p / parts; r < rows * (p + 1) / parts; ++r) {
            const T* x = ps + r * n;
            for (int64_t k = 0; k < n; ++k) sum[k] += value(x[k]);
          }
        }
      });
      T* out = dst.data<T>();
      for (int64_t p = 1; p < parts; ++p)
        for (int64_t k = 0; k < n; ++k) out[k] += partials[(p - 1) * n + k];
      return;
    }
    // Else threads take columns: each element of dst is summed by one thread in row order.
    parallel_for(n, grain_for_elements(rows), [&](int64_t begin, int64_t end) {
      const GradPtr<T, kMode> d = pd;  // a local copy: the compiler need not reload it after each store
      for (int64_t r = 0; r < rows; ++r) {
        const T* x = ps + r * n;
        for (int64_t k = begin; k < end; ++k) d[k] += value(x[k]);
      }
    });
    return;
  }
  const auto rows = [&](auto off, int64_t n, auto step) {
    const auto d = pd + off[0];
    const T* x = ps + off[1];
    if (step[0] == 1 && step[1] == 1)
      for (int64_t k = 0; k < n; ++k) d[k] += value(x[k]);
    else
      for (int64_t k = 0; k < n; ++k) d[k * step[0]] += value(x[k * step[1]]);
  };
  const std::array<Shape, 2> strides{broadcast_strides(dst, shape), broadcast_strides(src, shape)};
  if (shape == dst.shape() && dst.is_contiguous()) parallel_for_each_row<2>(shape, strides, rows);  // each element once
  else for_each_row<2>(shape, strides, rows);
}

}  // namespace

void write_into(Tensor& dst, GradMode mode, const Tensor& src, double scale) {
  const Shape shape = broadcast_shapes(dst.shape(), src.shape(), "accumulate");
  const bool assign = mode == GradMode::assign;
  if (assign && !(shape == dst.shape()))
    throw AutogradError(cat("accumulate: assigning ", src.shape(), " into a new gradient ", dst.shape(),
                            " would sum over broadcast dims; that needs GradMode::add into zeros"));
  if (assign && scale == 1 && src.dtype() == dst.dtype() && src.shape() == dst.shape() && src.is_contiguous() &&
      dst.is_contiguous() && is_floating(dst.dtype())) {
    // Split across the threads as the row kernels split their rows: each thread copies the part it is
    // likely to have written, and the next row kernel finds its part in its own core's cache.
    const int64_t size = itemsize(dst.dtype());
    auto* to = static_cast<char*>(dst.data_ptr());
    const auto* from = static_cast<const char*>(src.data_ptr());
    parallel_for(dst.numel(), kElementsPerRange, [&](int64_t begin, int64_t end) {
      std::memcpy(to + begin * size, from + begin * size, static_cast<size_t>((end - begin) * size));
    });
  } else {
    dispatch_float(dst.dtype(), "accumulate", [&](auto tag) {
      using T = decltype(tag);
      const T s = static_cast<T>(scale);
      if (assign && scale == 1) write_into_typed<T, GradMode::assign, false>(dst, src, s, shape);
      else if (assign) write_into_typed<T, GradMode::assign, true>(dst, src, s, shape);
      else if (scale == 1) write_into_typed<T, GradMode::add, false>(dst, src, s, shape);
      else write_into_typed<T, GradMode::add, true>(dst, src, s, shape);
    });
  }
  ++dst.storage()->version;
}

void accumulate_into(Tensor& dst, const Tensor& src, double scale) { write_into(dst, GradMode::add, src, scale); }

}  // namespace tapegrad
