#pragma once
// exp of a row shifted by its max: the inner loop of softmax (attention spends most of its softmax time
// here, and scalar expf calls leave the vector units idle).
#include <cstdint>

namespace tapegrad {

/// y_i = exp(x_i - m) for a contiguous float row, bit for bit what std::exp(float) (glibc's expf)
/// returns for x_i - m, with AVX2 + FMA four lanes at a time (see exp.cpp). y must not overlap x.
void exp_shifted(const float* x, float m, float* y, int64_t n);

/// y_i = exp(x_i - m) for a contiguous float row within 2 ulp of std::exp (not its bits), sixteen lanes at
/// a time with AVX-512 (eight with AVX2): for kernels not held to glibc's bits, which flash attention is
/// not (its online softmax rounds differently anyway). x_i - m = -inf gives 0, as below -87.34 (where
/// exp underflows float's normal range); NaN stays NaN. y may be x.
void exp_shifted_fast(const float* x, float m, float* y, int64_t n);

/// The same with std::exp, one element at a time.
void exp_shifted_reference(const float* x, float m, float* y, int64_t n);

}  // namespace tapegrad
