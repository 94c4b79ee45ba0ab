#pragma once
// Learning-rate schedules: a linear warm-up, then constant, cosine or linear decay. `step` counts optimizer
// steps from 0 (the step about to be taken: call opt.set_lr(schedule.lr_at(step)) before opt.step()).
// With W = warmup_steps, T = total_steps, base = base_lr, min = min_lr:
//   step < W          : lr = base·(step + 1)/W                      (base/W on the first step, base on step W−1)
//   W <= step < T     : p = (step − W)/(T − W)                      (0 on the first step after warm-up)
//       constant      : lr = base
//       cosine        : lr = min + (base − min)·0.5·(1 + cos(π·p))
//       linear        : lr = min + (base − min)·(1 − p)
//   step >= T         : constant: base; cosine and linear: min
// The last training step (T − 1) therefore still has lr slightly above min, as in PyTorch's and
// Hugging Face's cosine schedules; T is only read by the decaying kinds.
#include <cstdint>
#include <string>

#include "autograd/error.h"

namespace tapegrad::optim {

struct LrSchedule {
  enum class Kind { constant, cosine, linear };
  Kind kind = Kind::constant;
  double base_lr = 1e-3;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;
  double min_lr = 0;

  /// The learning rate for 0-based optimizer step `step` (formulas above). ValueError for a negative step
  /// or inconsistent fields (negative or non-finite rates, min_lr > base_lr, negative step counts, or a
  /// decaying kind whose total_steps does not exceed warmup_steps).
  double lr_at(int64_t step) const;
};

/// "constant", "cosine" or "linear" -> the kind; anything else is a ValueError listing the choices.
LrSchedule::Kind parse_schedule(const std::string& name);
/// The kind's name, as parse_schedule accepts it.
const char* schedule_name(LrSchedule::Kind kind);

}  // namespace tapegrad::optim
