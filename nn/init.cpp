#include "nn/init.h"

#include <cmath>

#include "autograd/tape.h"

namespace tapegrad::nn {

namespace {

void require_float(const Tensor& t, const char* op) {
  if (!is_floating(t.dtype()))
    throw DTypeError(cat(op, ": tensor ", t.shape(), " is ", dtype_name(t.dtype()), ", expected float32 or float64"));
}

/// Writes `values` (same shape, drawn in row-major order) into t without recording anything.
void assign(Tensor& t, const Tensor& values) {
  NoGradGuard no_grad;
  t.copy_(values);
}

}  // namespace

void uniform_(Tensor& t, double low, double high, Generator& gen) {
  require_float(t, "uniform_");
  if (!(low <= high)) throw ValueError(cat("uniform_: low ", low, " must not exceed high ", high));
  assign(t, uniform(t.shape(), gen, low, high, t.dtype()));
}

void normal_(Tensor& t, double mean, double std, Generator& gen) {
  require_float(t, "normal_");
  if (!(std >= 0)) throw ValueError(cat("normal_: std must be >= 0, got ", std));
  Tensor values = randn(t.shape(), gen, DType::float64);
  double* p = values.data<double>();
  for (int64_t i = 0; i < values.numel(); ++i) p[i] = mean + std * p[i];
  assign(t, values);  // copy_ converts to t's dtype
}

void zeros_(Tensor& t) {
  require_float(t, "zeros_");
  NoGradGuard no_grad;
  t.fill_(0);
}

void ones_(Tensor& t) {
  require_float(t, "ones_");
  NoGradGuard no_grad;
  t.fill_(1);
}

Fans fans(const Tensor& weight, const char* op) {
  if (weight.dim() < 2)
    throw ShapeError(cat(op, ": fan in and fan out need a weight with at least 2 dims, got ", weight.shape()));
  int64_t receptive = 1;
  for (int d = 2; d < weight.dim(); ++d) receptive *= weight.shape()[d];
  return {weight.shape()[1] * receptive, weight.shape()[0] * receptive};
}

void xavier_uniform_(Tensor& t, Generator& gen) {
  const Fans f = fans(t, "xavier_uniform_");
  if (f.in + f.out == 0) throw ShapeError(cat("xavier_uniform_: weight ", t.shape(), " has no elements"));
  const double bound = std::sqrt(6.0 / static_cast<double>(f.in + f.out));
  uniform_(t, -bound, bound, gen);
}

void kaiming_uniform_linear_(Tensor& weight, Generator& gen) {
  const Fans f = fans(weight, "kaiming_uniform_linear_");
  if (f.in == 0) throw ShapeError(cat("kaiming_uniform_linear_: weight ", weight.shape(), " has fan_in 0"));
  const double bound = 1.0 / std::sqrt(static_cast<double>(f.in));
  uniform_(weight, -bound, bound, gen);
}

}  // namespace tapegrad::nn
