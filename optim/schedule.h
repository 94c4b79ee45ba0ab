#pragma once
// Learning-rate schedules: a linear warm-up, then constant, cosine or linear decay (or a user's schedule,
// registered by name as the built-in ones are: register_schedule below). `step` counts optimizer
// steps from 0 (the step about to be taken: call opt.set_lr(schedule.lr_at(step)) before opt.step()).
// With W = warmup_steps, T = total_steps, base = base_lr, min = min_lr:
//   step < W          : lr = base·(step + 1)/W                      (base/W on the first step, base on step W−1)
//   W <= step < T     : p = (step − W)/(T − W)                      (0 on the first step after warm-up)
//       constant      : lr = base
//       cosine        : lr = min + (base − min)·0.5·(1 + cos(π·p))
//       linear        : lr = min + (base − min)·(1 − p)
//   step >= T         : constant: base; cosine and linear: min
// The last training step (T − 1) therefore still has lr slightly above min, as in PyTorch's and
// Hugging Face's cosine schedules; T is only read by the decaying kinds. A registered schedule gives the
// decay's factor at p (1 at p = 0, 0 at p = 1): lr = min + (base − min)·factor(p).
#include <cstdint>
#include <functional>
#include <string>

#include "autograd/error.h"
#include "autograd/named_registry.h"

namespace tapegrad::optim {

struct ScheduleEntry {
  std::string name = {}, help = {};
  /// The decay after warm-up at progress p in [0, 1): lr = min + (base − min)·factor(p). Null: no decay (the
  /// rate stays base; total_steps and min_lr are not read).
  std::function<double(double progress)> factor = {};
};

/// Adds a schedule; a missing name or one registered before is a ValueError. Returns true, so that a file
/// registers at load time.
bool register_schedule(ScheduleEntry entry);
/// The registered schedules (constant, cosine, linear first): schedules().at(name) is a ValueError
/// "unknown learning-rate schedule 'step' (registered: constant, cosine or linear)" for an unknown name.
const NamedRegistry<ScheduleEntry>& schedules();

struct LrSchedule {
  std::string kind = "constant";  // a registered schedule's name
  double base_lr = 1e-3;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;
  double min_lr = 0;

  /// The learning rate for 0-based optimizer step `step` (formulas above). ValueError for an unregistered
  /// kind, a negative step or inconsistent fields (negative or non-finite rates, min_lr > base_lr, negative
  /// step counts, or a decaying kind whose total_steps does not exceed warmup_steps).
  double lr_at(int64_t step) const;
};

}  // namespace tapegrad::optim
