#pragma once
// Where a backward kernel puts its result: a pointer into a gradient buffer through which every write is
// `dx[i] += v`, the one thing a backward rule does. The BackwardContext (autograd/tape.h) decides once per
// buffer what `+=` means there:
//   add    : d += v   the buffer already holds a gradient (another use of the tensor, an earlier backward)
//   assign : d = v    the buffer is new and this contribution is its whole value, so adding to zeros
//                     would be the same: no zero-fill, and no read of the zeros back
// The mode is part of the type, so a kernel written once as `dx[i] += v` compiles to two plain loops.
#include <cstdint>

namespace tapegrad {

enum class GradMode { add, assign };

template <class T, GradMode kMode>
class GradPtr {
 public:
  using value_type = T;
  static constexpr GradMode mode = kMode;
  /// BLAS's beta in C = alpha·A·B + beta·C: 0 writes C without reading it, 1 adds into it.
  static constexpr T beta = kMode == GradMode::assign ? T(0) : T(1);

  explicit GradPtr(T* p) : p_(p) {}

  /// One element; it only takes `+= v`.
  class Ref {
   public:
    explicit Ref(T& d) : d_(d) {}
    void operator+=(T v) const {
      if constexpr (kMode == GradMode::assign) d_ = v;
      else d_ += v;
    }

   private:
    T& d_;
  };

  Ref operator[](int64_t i) const { return Ref(p_[i]); }
  GradPtr operator+(int64_t offset) const { return GradPtr(p_ + offset); }
  T* data() const { return p_; }

 private:
  T* p_;
};

/// A destination that assigns, for a kernel that writes a scratch row rather than a gradient buffer
/// (attention's dS).
template <class T>
GradPtr<T, GradMode::assign> assign_to(T* p) {
  return GradPtr<T, GradMode::assign>(p);
}

/// No destination: for a fused kernel with several outputs when this one is not wanted (layer_norm's dx
/// when only its weight and bias need gradients). It has a type and nothing else.
template <class T>
struct NoGrad {
  using value_type = T;
  NoGrad operator+(int64_t) const { return *this; }
};

}  // namespace tapegrad
