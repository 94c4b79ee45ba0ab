#include "autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "autograd/random.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

namespace {

/// sum(out ⊙ r) in double, whatever out's dtype.
double contract(const Tensor& out, const std::vector<double>& r) {
  const std::vector<double> values = out.to_vector();
  double total = 0;
  for (size_t i = 0; i < values.size(); ++i) total += values[i] * r[i];
  return total;
}

/// Reads/writes element i of a contiguous float tensor as double.
double get(const Tensor& t, int64_t i) {
  return t.dtype() == DType::float64 ? t.data<double>()[i] : t.data<float>()[i];
}
void set(const Tensor& t, int64_t i, double v) {
  if (t.dtype() == DType::float64) t.data<double>()[i] = v;
  else t.data<float>()[i] = static_cast<float>(v);
}

}  // namespace

double GradcheckResult::max_abs_error() const {
  double worst = 0;
  for (const auto& in : inputs) worst = std::max(worst, in.max_abs_error);
  return worst;
}

double GradcheckResult::max_rel_error() const {
  double worst = 0;
  for (const auto& in : inputs) worst = std::max(worst, in.max_rel_error);
  return worst;
}

std::string GradcheckResult::str() const {
  std::ostringstream out;
  for (const auto& in : inputs) {
    char line[256];
    std::snprintf(line, sizeof line, "  %-24s max abs %.3e  max rel %.3e  (element %lld)  %s\n", in.name.c_str(),
                  in.max_abs_error, in.max_rel_error, static_cast<long long>(in.worst_element),
                  in.passed ? "ok" : "FAIL");
    out << line;
  }
  return out.str();
}

GradcheckResult gradcheck(const TensorFn& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options,
                          const std::vector<std::string>& names) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (x.requires_grad() && (!x.is_leaf() || !x.is_contiguous()))
      throw ValueError(cat("gradcheck: input ", i, " (shape ", x.shape(), ") must be a contiguous leaf"));
    x.zero_grad();
  }
  auto name_of = [&](size_t i) { return i < names.size() ? names[i] : "input " + std::to_string(i); };

  // Analytic: one backward of sum(out ⊙ r), i.e. backward(out, r).
  Tape::current().clear();
  GradcheckResult result;
  Tensor out = f(inputs);
  if (!out.requires_grad()) throw ValueError("gradcheck: the output does not depend on any input that requires grad");
  std::set<std::string> seen;
  for (size_t i = 0; i < Tape::current().size(); ++i) seen.insert(Tape::current().entry(i).name());
  result.ops_seen.assign(seen.begin(), seen.end());
  // A stream of its own: inputs drawn from options.seed must not equal the cotangent (for a one-input op
  // with out.shape == x.shape, r = x would make, e.g., LayerNorm's gradient nearly vanish).
  Generator gen(options.seed ^ 0x9E3779B97F4A7C15ULL);
  Tensor cotangent = randn(out.shape(), gen, out.dtype());
  const std::vector<double> r = cotangent.to_vector();
  backward(out, cotangent);

  // Numeric: central differences of sum(f(x) ⊙ r), one element at a time.
  NoGradGuard no_grad;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.requires_grad()) continue;
    InputReport report;
    report.name = name_of(i);
    const Tensor analytic = x.grad();
    for (int64_t e = 0; e < x.numel(); ++e) {
      const double original = get(x, e);
      set(x, e, original + options.eps);
      const double plus = contract(f(inputs), r);
      set(x, e, original - options.eps);
      const double minus = contract(f(inputs), r);
      set(x, e, original);
      const double numeric = (plus - minus) / (2 * options.eps);
      const double a = analytic.defined() ? get(analytic, e) : 0.0;  // no gradient reached it: zero
      const double abs_err = std::fabs(a - numeric);
      const double scale = std::max(std::fabs(a), std::fabs(numeric));
      const double rel_err = scale > 1e-6 ? abs_err / scale : 0.0;
      if (!(abs_err <= options.atol + options.rtol * std::fabs(numeric))) report.passed = false;
      if (abs_err > report.max_abs_error || std::isnan(abs_err)) {
        report.max_abs_error = abs_err;
        report.worst_element = e;
      }
      report.max_rel_error = std::max(report.max_rel_error, rel_err);
    }
    result.passed = result.passed && report.passed;
    result.inputs.push_back(report);
    x.zero_grad();
  }
  return result;
}

Tensor numerical_jacobian(const std::function<Tensor(const Tensor&)>& f, const Tensor& x_in, double eps) {
  NoGradGuard no_grad;
  Tensor x = x_in.detach().clone();
  const int64_t n_out = f(x).numel(), n_in = x.numel();
  Tensor jacobian = zeros({n_out, n_in}, x.dtype());
  for (int64_t j = 0; j < n_in; ++j) {
    const double original = get(x, j);
    set(x, j, original + eps);
    const std::vector<double> plus = f(x).to_vector();
    set(x, j, original - eps);
    const std::vector<double> minus = f(x).to_vector();
    set(x, j, original);
    for (int64_t i = 0; i < n_out; ++i) set(jacobian, i * n_in + j, (plus[i] - minus[i]) / (2 * eps));
  }
  return jacobian;
}

}  // namespace tapegrad
