#include "train/report/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "autograd/error.h"
#include "train/io/atomic_file.h"

namespace tapegrad {

namespace {

/// A validation cell: empty on a row without a validation (NaN in MetricsRow).
std::string validation_cell(double v) {
  if (std::isnan(v)) return "";
  char cell[32];
  std::snprintf(cell, sizeof cell, "%.17g", v);
  return cell;
}

/// One number of a row, or NaN for an empty cell where one is allowed; false when malformed.
bool parse_cell(const std::string& cell, bool may_be_empty, double& value) {
  if (cell.empty()) {
    value = std::numeric_limits<double>::quiet_NaN();
    return may_be_empty;
  }
  char* end = nullptr;
  value = std::strtod(cell.c_str(), &end);
  return end == cell.c_str() + cell.size();
}

}  // namespace

void write_metrics_csv(const std::string& path, const std::vector<MetricsRow>& rows) {
  std::ostringstream out;
  out << kMetricsHeader << '\n';
  for (const MetricsRow& r : rows) {
    char line[512];
    std::snprintf(line, sizeof line, "%lld,%lld,%.17g,%.17g,%s,%s,%.6g,%.3f\n", static_cast<long long>(r.step),
                  static_cast<long long>(r.epoch), r.lr, r.train_loss, validation_cell(r.valid_loss).c_str(),
                  validation_cell(r.valid_accuracy).c_str(), r.steps_per_second, r.elapsed_seconds);
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
    std::vector<std::string> cells;
    std::istringstream fields(line);
    for (std::string cell; std::getline(fields, cell, ',');) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.emplace_back();  // getline drops a trailing empty cell
    double v[8];
    bool ok = cells.size() == 8;
    for (size_t i = 0; ok && i < 8; ++i) ok = parse_cell(cells[i], i == 4 || i == 5, v[i]);
    if (!ok || v[0] != std::floor(v[0]) || v[1] != std::floor(v[1]))
      throw IOError(cat(path, ":", number, ": expected 8 comma-separated numbers (the validation ones may be empty)"));
    rows.push_back({static_cast<int64_t>(v[0]), static_cast<int64_t>(v[1]), v[2], v[3], v[4], v[5], v[6], v[7]});
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
