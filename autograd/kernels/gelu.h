#pragma once
// Exact GELU, y = x Φ(x), for contiguous float arrays: the language model's feed-forward spent 29% of its
// step in scalar std::erf (forward) and std::erf + std::exp (backward). The fast kernels evaluate Φ from a
// Chebyshev fit of erfc in plain loops the compiler vectorises, with exp_shifted_fast for the exponentials;
// the references evaluate the same math in double with std::erfc and std::exp and round once.
// tests/autograd/test_kernels.cpp pins the fast kernels to the references (the bound is stated there and
// in gelu.cpp). float64 (the gradchecks) does not come here: autograd/ops/unary.cpp keeps std::erf.
#include <cstdint>

#include "autograd/kernels/grad_ptr.h"

namespace tapegrad {

/// y_i = x_i Φ(x_i), Φ(x) = ½ erfc(-x/√2). x, y: (n). y may be x.
void gelu_forward(const float* x, float* y, int64_t n);

/// dx_i += dy_i (Φ(x_i) + x_i φ(x_i)), φ(x) = e^{-x²/2} / √(2π). dy, x, dx: (n); dx a GradPtr (add or
/// assign, see grad_ptr.h), not overlapping dy or x.
template <GradMode kMode>
void gelu_backward(const float* dy, const float* x, GradPtr<float, kMode> dx, int64_t n);

/// The same from std::erfc and std::exp in double, one element at a time, rounded to float once.
void gelu_forward_reference(const float* x, float* y, int64_t n);
template <GradMode kMode>
void gelu_backward_reference(const float* dy, const float* x, GradPtr<float, kMode> dx, int64_t n);

}  // namespace tapegrad
