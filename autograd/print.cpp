// Tensor printing, close to PyTorch's: 4 decimals, aligned columns, rows wrapped at 80 characters,
// "..." summaries past 1000 elements, integral floats as "2.", scientific notation for wide ranges.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "autograd/tape.h"
#include "autograd/tensor.h"

namespace tapegrad {

namespace {

constexpr int64_t kSummarizeAbove = 1000, kEdgeItems = 3, kLineWidth = 80;

struct Formatter {
  enum class Style { integral, fixed, scientific, integer, boolean } style = Style::fixed;
  size_t width = 1;

  std::string format(double v) const {
    char buf[64];
    switch (style) {
      case Style::boolean: return v != 0 ? "True" : "False";
      case Style::integer: std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v)); break;
      case Style::integral:
        if (std::isfinite(v)) std::snprintf(buf, sizeof buf, "%.0f.", v);
        else std::snprintf(buf, sizeof buf, "%s", std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
        break;
      case Style::fixed:
        if (std::isfinite(v)) std::snprintf(buf, sizeof buf, "%.4f", v);
        else std::snprintf(buf, sizeof buf, "%s", std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
        break;
      case Style::scientific:
        if (std::isfinite(v)) std::snprintf(buf, sizeof buf, "%.4e", v);
        else std::snprintf(buf, sizeof buf, "%s", std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
        break;
    }
    return buf;
  }
};

Formatter choose_format(const std::vector<double>& values, DType dtype) {
  Formatter f;
  if (dtype == DType::boolean) f.style = Formatter::Style::boolean;
  else if (dtype == DType::int64) f.style = Formatter::Style::integer;
  else {
    bool integral = true;
    double max_abs = 0, min_abs = INFINITY;
    for (double v : values) {
      if (!std::isfinite(v)) continue;
      integral = integral && v == std::round(v);
      max_abs = std::max(max_abs, std::fabs(v));
      if (v != 0) min_abs = std::min(min_abs, std::fabs(v));
    }
    if (integral && max_abs < 1e8) f.style = Formatter::Style::integral;
    else if (max_abs >= 1e8 || (min_abs < 1e-4) || (min_abs < INFINITY && max_abs / min_abs > 1000))
      f.style = Formatter::Style::scientific;
  }
  for (double v : values) f.width = std::max(f.width, f.format(v).size());
  return f;
}

/// Indices shown along a dim of this size: all, or the first and last kEdgeItems with a gap (-1).
std::vector<int64_t> shown(int64_t size, bool summarize) {
  std::vector<int64_t> idx;
  if (summarize && size > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
    idx.push_back(-1);
    for (int64_t i = size - kEdgeItems; i < size; ++i) idx.push_back(i);
  } else {
    for (int64_t i = 0; i < size; ++i) idx.push_back(i);
  }
  return idx;
}

struct Printer {
  const Tensor& t;
  const std::vector<double>& values;  // row-major
  Formatter f;
  bool summarize;
  std::ostringstream out;

  void print(int dim, int64_t flat, int indent) {
    const Shape& shape = t.shape();
    if (dim == shape.rank()) {
      out << std::string(f.width - f.format(values[flat]).size(), ' ') << f.format(values[flat]);
      return;
    }
    int64_t inner = 1;
    for (int d = dim + 1; d < shape.rank(); ++d) inner *= shape[d];
    out << '[';
    const auto idx = shown(shape[dim], summarize);
    const bool last_dim = dim == shape.rank() - 1;
    const int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent - 1) / static_cast<int64_t>(f.width + 2));
    int64_t on_line = 0;
    for (size_t k = 0; k < idx.size(); ++k) {
      if (k > 0) {
        out << ',';
        if (last_dim) {
          if (++on_line >= per_line) {
            out << '\n' << std::string(indent + 1, ' ');
            on_line = 0;
          } else {
            out << ' ';
          }
        } else {
          out << std::string(shape.rank() - dim - 1, '\n') << std::string(indent + 1, ' ');
        }
      }
      if (idx[k] < 0) out << "...";
      else print(dim + 1, flat + idx[k] * inner, indent + 1);
    }
    out << ']';
  }
};

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::vector<double> values = to_vector();
  const bool summarize = numel() > kSummarizeAbove;
  std::vector<double> visible;
  if (summarize) {  // format by the shown values only, as PyTorch does
    for (size_t i = 0; i < values.size(); ++i)
      if (i < 3 || i + 3 >= values.size()) visible.push_back(values[i]);
  }
  Printer printer{*this, values, choose_format(summarize ? visible : values, dtype()), summarize, {}};
  printer.out << "tensor(";
  printer.print(0, 0, 7);
  if (numel() == 0) printer.out.str("tensor([]"), printer.out.seekp(0, std::ios_base::end);
  if (dtype() == DType::float64) printer.out << ", dtype=float64";
  if (requires_grad()) {
    if (is_leaf()) printer.out << ", requires_grad=True";
    else {
      const Tape& tape = Tape::current();
      const int64_t node = impl().autograd->node;
      if (impl().autograd->tape_generation == tape.generation() && node < static_cast<int64_t>(tape.size()))
        printer.out << ", grad_fn=<" << tape.entry(node).name() << ">";
    }
  }
  printer.out << ')';
  return printer.out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.str(); }

}  // namespace tapegrad
