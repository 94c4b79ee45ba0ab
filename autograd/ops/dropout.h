#pragma once
// Inverted dropout.
#include "autograd/tensor.h"

namespace tapegrad {

class Generator;

/// Zeroes each element with probability p and scales the survivors by 1/(1-p), drawing from gen; the
/// identity (no draw) when !training or p == 0. p must be in [0, 1).   x: any -> same
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);

}  // namespace tapegrad
