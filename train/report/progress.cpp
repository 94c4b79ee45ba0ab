#include "train/report/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>

#include "autograd/autograd.h"
#include "autograd/blas.h"

namespace tapegrad {

Progress::Progress(std::ostream& log) : log_(log), live_(::isatty(STDERR_FILENO)) {}

void Progress::step(int64_t step, int64_t total_steps, double loss, std::optional<double> accuracy, double rate,
                    double now) {
  if (!live_ || now - last_draw_ < 0.1) return;
  last_draw_ = now;
  char line[160];
  std::snprintf(line, sizeof line, "\rstep %lld/%lld  loss %.4f  val acc %s  %.0f steps/s  ETA %s   ",
                static_cast<long long>(step), static_cast<long long>(total_steps), loss,
                accuracy ? (std::to_string(*accuracy * 100).substr(0, 5) + "%").c_str() : "-", rate,
                format_duration((total_steps - step) / rate).c_str());
  log_ << line << std::flush;
}

void Progress::clear() {
  if (live_) log_ << "\r\033[K" << std::flush;
}

void Progress::validating(int64_t step, int64_t total_steps, int64_t examples, double expected_seconds) {
  if (!(expected_seconds >= 2)) return;
  char line[200];
  std::snprintf(line, sizeof line, "step %lld/%lld  validating %lld examples (about %s)", static_cast<long long>(step),
                static_cast<long long>(total_steps), static_cast<long long>(examples),
                format_duration(expected_seconds).c_str());
  if (live_) {
    log_ << "\r\033[K" << line << std::flush;
  } else if (!said_long_validation_) {  // a language model's windows are its held-out text: no flag sets them
    log_ << line << (characters_per_token_ > 0 ? "\n" : "; --valid-size sets how many a built-in task has\n") << std::flush;
  }
  said_long_validation_ = true;
}

void Progress::validation(const MetricsRow& row, int64_t total_steps) {
  if (live_) log_ << "\r\033[K";
  char line[256];
  if (characters_per_token_ > 0) {
    std::snprintf(line, sizeof line,
                  "step %lld/%lld  lr %.2e  loss %.4f  val loss %.4f  ppl %.3f  bpc %.4f  acc %.2f%%  %.1f steps/s  %s\n",
                  static_cast<long long>(row.step), static_cast<long long>(total_steps), row.lr, row.train_loss,
                  row.valid_loss, std::exp(row.valid_loss), row.valid_loss / std::log(2.0) / characters_per_token_,
                  100 * row.valid_accuracy, row.steps_per_second, format_duration(row.elapsed_seconds).c_str());
    log_ << line << std::flush;
    return;
  }
  std::snprintf(line, sizeof line,
                "step %lld/%lld  epoch %lld  lr %.2e  loss %.4f  val loss %.4f  val acc %.2f%%  %.1f steps/s  %s\n",
                static_cast<long long>(row.step), static_cast<long long>(total_steps), static_cast<long long>(row.epoch),
                row.lr, row.train_loss, row.valid_loss, 100 * row.valid_accuracy, row.steps_per_second,
                format_duration(row.elapsed_seconds).c_str());
  log_ << line << std::flush;
}

void Progress::compute(int threads_option) {
  const BlasInfo blas = blas_info();
  log_ << "compute: " << num_threads() << (num_threads() == 1 ? " thread" : " threads")
       << (threads_option == 0 ? " (every core)" : "") << "; BLAS " << blas.library << ", kernels " << blas.kernels
       << " (" << blas.how_chosen << ")\n";
  if (!blas.advice.empty()) log_ << "advice: " << blas.advice << "\n";
}

}  // namespace tapegrad
