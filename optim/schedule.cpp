#include "optim/schedule.h"

#include <cmath>
#include <numbers>

namespace tapegrad::optim {

namespace {

NamedRegistry<ScheduleEntry>& registry() {
  static NamedRegistry<ScheduleEntry> all("learning-rate schedule", "register_schedule");
  return all;
}

// One initialiser runs every registration of this file when the library loads.
const bool registered = [] {
  register_schedule({.name = "constant", .help = "base lr after warm-up"});
  register_schedule({.name = "cosine",
                     .help = "cosine decay from base lr to min lr over the steps after warm-up",
                     .factor = [](double p) { return 0.5 * (1 + std::cos(std::numbers::pi * p)); }});
  register_schedule({.name = "linear",
                     .help = "linear decay from base lr to min lr over the steps after warm-up",
                     .factor = [](double p) { return 1 - p; }});
  return true;
}();

}  // namespace

bool register_schedule(ScheduleEntry entry) { return registry().add(std::move(entry)); }

const NamedRegistry<ScheduleEntry>& schedules() { return registry(); }

double LrSchedule::lr_at(int64_t step) const {
  const ScheduleEntry& entry = schedules().at(kind);
  const char* kname = kind.c_str();
  if (!(std::isfinite(base_lr) && base_lr >= 0))
    throw ValueError(cat("LrSchedule (", kname, "): base_lr must be finite and >= 0, got ", base_lr));
  if (warmup_steps < 0)
    throw ValueError(cat("LrSchedule (", kname, "): warmup_steps must be >= 0, got ", warmup_steps));
  if (entry.factor) {
    if (!(min_lr >= 0 && min_lr <= base_lr))
      throw ValueError(cat("LrSchedule (", kname, "): min_lr must be in [0, base_lr = ", base_lr, "], got ", min_lr));
    if (total_steps <= warmup_steps)  // nothing left to decay over: surely a forgotten total_steps
      throw ValueError(cat("LrSchedule (", kname, "): total_steps (", total_steps, ") must exceed warmup_steps (",
                           warmup_steps, ")"));
  }
  if (step < 0) throw ValueError(cat("LrSchedule (", kname, "): step must be >= 0, got ", step));

  if (step < warmup_steps) return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (!entry.factor) return base_lr;
  if (step >= total_steps) return min_lr;
  const double progress = static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps);
  return min_lr + (base_lr - min_lr) * entry.factor(progress);
}

}  // namespace tapegrad::optim
