#pragma once
// exp of a row shifted by its max: the inner loop of softmax (attention spends most of its softmax time
// here, and scalar expf calls leave the vector units idle).
#include <cstdint>

namespace tapegrad {

/// y_i = exp(x_i - m) for a contiguous float row, bit for bit what std::exp(float) (glibc's expf)
/// returns for x_i - m, with AVX2 + FMA four lanes at a time (see exp.cpp). y must not overlap x.
void exp_shifted(const float* x, float m, float* y, int64_t n);

/// The same with std::exp, one element at a time.
void exp_shifted_reference(const float* x, float m, float* y, int64_t n);

}  // namespace tapegrad
