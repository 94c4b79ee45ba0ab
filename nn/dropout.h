#pragma once
// Dropout as a module: active in training mode only. It draws from the model's shared dropout stream, a
// Generator held by shared pointer, so that a trainer can save and restore that stream's state with a
// checkpoint and resume with the same masks.
#include <memory>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/module.h"

namespace tapegrad::nn {

class Dropout : public Module {
 public:
  /// p in [0, 1); rng may be null only when p == 0.
  Dropout(double p, std::shared_ptr<Generator> rng);

  /// Training: zeroes each element with probability p and scales the rest by 1/(1-p). Evaluation, or p == 0:
  /// x itself.   x: any -> same
  Tensor forward(const Tensor& x) const;

  double p() const { return p_; }
  const std::shared_ptr<Generator>& rng() const { return rng_; }

 private:
  double p_;
  std::shared_ptr<Generator> rng_;
};

}  // namespace tapegrad::nn
