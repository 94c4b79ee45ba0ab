#include "optim/schedule.h"

#include <cmath>
#include <numbers>

namespace tapegrad::optim {

double LrSchedule::lr_at(int64_t step) const {
  const char* kname = schedule_name(kind);
  if (!(std::isfinite(base_lr) && base_lr >= 0))
    throw ValueError(cat("LrSchedule (", kname, "): base_lr must be finite and >= 0, got ", base_lr));
  if (warmup_steps < 0)
    throw ValueError(cat("LrSchedule (", kname, "): warmup_steps must be >= 0, got ", warmup_steps));
  if (kind != Kind::constant) {
    if (!(min_lr >= 0 && min_lr <= base_lr))
      throw ValueError(cat("LrSchedule (", kname, "): min_lr must be in [0, base_lr = ", base_lr, "], got ", min_lr));
    if (total_steps <= warmup_steps)  // nothing left to decay over: surely a forgotten total_steps
      throw ValueError(cat("LrSchedule (", kname, "): total_steps (", total_steps, ") must exceed warmup_steps (",
                           warmup_steps, ")"));
  }
  if (step < 0) throw ValueError(cat("LrSchedule (", kname, "): step must be >= 0, got ", step));

  if (step < warmup_steps) return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (kind == Kind::constant) return base_lr;
  if (step >= total_steps) return min_lr;
  const double progress = static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps);
  const double factor = kind == Kind::cosine ? 0.5 * (1 + std::cos(std::numbers::pi * progress)) : 1 - progress;
  return min_lr + (base_lr - min_lr) * factor;
}

LrSchedule::Kind parse_schedule(const std::string& name) {
  for (LrSchedule::Kind kind : {LrSchedule::Kind::constant, LrSchedule::Kind::cosine, LrSchedule::Kind::linear})
    if (name == schedule_name(kind)) return kind;
  throw ValueError(cat("unknown learning-rate schedule '", name, "'; choose one of: constant, cosine, linear"));
}

const char* schedule_name(LrSchedule::Kind kind) {
  switch (kind) {
    case LrSchedule::Kind::constant: return "constant";
    case LrSchedule::Kind::cosine: return "cosine";
    case LrSchedule::Kind::linear: return "linear";
  }
  return "?";
}

}  // namespace tapegrad::optim
