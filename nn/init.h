#pragma once
// Parameter initialisation, in place, drawing from an explicit Generator (never std:: distributions, whose
// output differs between standard libraries). The bounds are PyTorch's, so a layer starts from the same
// distribution it would in PyTorch (not the same numbers: the generators differ).
// Each writes into a leaf that may require grad; the write is not recorded on the tape.
#include "autograd/random.h"
#include "autograd/tensor.h"

namespace tapegrad::nn {

/// t ~ U(low, high), elementwise.   t: any float -> same, in place
void uniform_(Tensor& t, double low, double high, Generator& gen);
/// t ~ N(mean, std²), elementwise.   t: any float -> same, in place
void normal_(Tensor& t, double mean, double std, Generator& gen);
/// t = 0.   t: any float -> same, in place
void zeros_(Tensor& t);
/// t = 1.   t: any float -> same, in place
void ones_(Tensor& t);
/// Glorot: t ~ U(-b, b), b = √(6 / (fan_in + fan_out)).   t: (out, in, ...) -> same, in place
void xavier_uniform_(Tensor& t, Generator& gen);
/// PyTorch's nn.Linear weight default, kaiming_uniform_(a = √5): gain √(2 / (1 + a²)) = √(1/3), so
/// b = gain · √(3 / fan_in) = 1/√fan_in and weight ~ U(-b, b).   weight: (out, in, ...) -> same, in place
void kaiming_uniform_linear_(Tensor& weight, Generator& gen);

/// (fan_in, fan_out) of a weight as PyTorch computes them: (in · r, out · r), r = product of the dims
/// after the first two.   weight: (out, in, ...) with at least 2 dims
struct Fans {
  int64_t in;
  int64_t out;
};
Fans fans(const Tensor& weight, const char* op);

}  // namespace tapegrad::nn
