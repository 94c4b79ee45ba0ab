#include "train/metrics.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "autograd/error.h"
#include "train/checkpoint.h"

namespace tapegrad {

void write_metrics_csv(const std::string& path, const std::vector<MetricsRow>& rows) {
  std::ostringstream out;
  out << kMetricsHeader << '\n';
  for (const MetricsRow& r : rows) {
    char line[512];
    std::snprintf(line, sizeof line, "%lld,%lld,%.17g,%.17g,%.17g,%.17g,%.6g,%.3f\n", static_cast<long long>(r.step),
                  static_cast<long long>(r.epoch), r.lr, r.train_loss, r.valid_loss, r.valid_accuracy,
                  r.steps_per_second, r.elapsed_seconds);
    out << line;
  }
  write_file_atomic(path, out.str());
}

std::vector<MetricsRow> read_metrics_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IOError(cat(path, ": cannot read"));
  std::string line;
  if (!std::getline(in, line) || line != kMetricsHeader) throw IOError(cat(path, ":1: not a tapegrad metrics.csv header"));
  std::vector<MetricsRow> rows;
  for (int64_t number = 2; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    MetricsRow r{};
    long long step = 0, epoch = 0;
    char tail = 0;
    if (std::sscanf(line.c_str(), "%lld,%lld,%lf,%lf,%lf,%lf,%lf,%lf%c", &step, &epoch, &r.lr, &r.train_loss,
                    &r.valid_loss, &r.valid_accuracy, &r.steps_per_second, &r.elapsed_seconds, &tail) != 8)
      throw IOError(cat(path, ":", number, ": expected 8 comma-separated numbers"));
    r.step = step;
    r.epoch = epoch;
    rows.push_back(r);
  }
  return rows;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long long s = std::llround(seconds);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}

}  // namespace tapegrad
