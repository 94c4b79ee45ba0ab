#pragma once
// A small, fast training configuration for the library tests that check the trainer's mechanics rather
// than learning.
#include <string>

#include "train/train_options.h"

namespace tapegrad::testing {

/// The majority task over 6 symbols (lengths 4..12), a 16-wide model with 2 heads, batches of 16, a
/// validation every 10 steps, into `out`.
inline TrainOptions small_options(const std::string& out) {
  TrainOptions o;
  o.task = {"majority", 6, 4, 12};
  o.model.d_model = 16;
  o.model.n_heads = 2;
  o.model.d_ff = 32;
  o.batch_size = 16;
  o.eval_every = 10;
  o.out = out;
  return o;
}

}  // namespace tapegrad::testing
