#include "autograd/anomaly.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "autograd/iterate.h"
#include "autograd/tape.h"

namespace tapegrad {

namespace {

thread_local bool anomaly_on = false;
thread_local bool backward_running = false;
thread_local bool forward_checks = false;  // anomaly_on && !backward_running: the one flag every op reads

struct Scope {
  std::shared_ptr<const std::string> path;
  const void* owner;
};
thread_local std::vector<Scope> scopes;

/// The first element, in row-major order, that is NaN (or, unless nan_only, ±Inf); index -1 when none.
struct NonFinite {
  int64_t index = -1;
  double value = 0;
  bool found() const { return index >= 0; }
};

/// Whether a contiguous row holds a NaN or ±Inf: an exponent of all ones. Written on the bits, so that
/// GCC vectorises it and a check costs about one read of the tensor.
template <class T>
bool row_has_nonfinite(const T* p, int64_t n) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  constexpr Bits exponent = std::bit_cast<Bits>(std::numeric_limits<T>::infinity());  // all ones, zero mantissa
  Bits any = 0;
  for (int64_t i = 0; i < n; ++i) any |= (std::bit_cast<Bits>(p[i]) & exponent) == exponent;
  return any != 0;
}

NonFinite find_nonfinite(const Tensor& t, bool nan_only) {
  NonFinite first;
  if (!t.defined() || !is_floating(t.dtype())) return first;
  dispatch_float(t.dtype(), "anomaly", [&](auto tag) {
    using T = decltype(tag);
    const T* data = t.data<T>();
    int64_t row_start = 0;  // for_each_row visits the rows in row-major order, all of the same length
    for_each_row<1>(t.shape(), {t.strides()}, [&](auto off, int64_t n, auto step) {
      const T* row = data + off[0];
      if (!first.found() && (step[0] != 1 || row_has_nonfinite(row, n))) {
        for (int64_t i = 0; i < n; ++i) {
          const T v = row[i * step[0]];
          if (nan_only ? std::isnan(v) : !std::isfinite(v)) {
            first = {row_start + i, static_cast<double>(v)};
            break;
          }
        }
      }
      row_start += n;
    });
  });
  return first;
}

const char* kind(double v) { return std::isnan(v) ? "NaN" : v > 0 ? "Inf" : "-Inf"; }

/// "element [1,3] of <what> [2,4]": the row-major index turned into coordinates.
std::string element(const Shape& shape, int64_t index, const char* what) {
  if (shape.rank() == 0) return cat("the scalar ", what);
  Shape coordinates = shape;
  for (int d = shape.rank() - 1; d >= 0; --d) {
    coordinates[d] = index % shape[d];
    index /= shape[d];
  }
  return cat("element ", coordinates, " of ", what, ' ', shape);
}

std::string in_scope(const std::shared_ptr<const std::string>& path) {
  return path && !path->empty() ? "; in " + *path : "";
}

}  // namespace

bool detect_anomaly() { return anomaly_on; }

void set_detect_anomaly(bool on) {
  anomaly_on = on;
  forward_checks = anomaly_on && !backward_running;
}

bool ScopeName::push_scope(std::string_view name, const void* owner) {
  if (owner && !scopes.empty() && scopes.back().owner == owner) return false;
  std::shared_ptr<const std::string> path;
  if (name.empty() && !scopes.empty()) path = scopes.back().path;
  else if (scopes.empty() || scopes.back().path->empty()) path = std::make_shared<const std::string>(name);
  else path = std::make_shared<const std::string>(cat(*scopes.back().path, '.', name));
  scopes.push_back({std::move(path), owner});
  return true;
}

void ScopeName::pop_scope() { scopes.pop_back(); }

std::string current_scope() { return scopes.empty() ? std::string() : *scopes.back().path; }

namespace detail {

std::shared_ptr<const std::string> current_scope_path() { return scopes.empty() ? nullptr : scopes.back().path; }

bool checking_forward() { return forward_checks; }

BackwardRunning::BackwardRunning() : previous_(backward_running) {
  backward_running = true;
  forward_checks = false;
}

BackwardRunning::~BackwardRunning() {
  backward_running = previous_;
  forward_checks = anomaly_on && !backward_running;
}

void check_forward(const char* op, const Tensor& out, std::span<const Tensor* const> inputs,
                   bool infinity_by_design) {
  if (!out.defined() || !is_floating(out.dtype())) return;
  for (const Tensor* input : inputs)  // a view makes no new values (and an expanded one would be read many times)
    if (input->defined() && input->storage() == out.storage()) return;
  NonFinite bad = find_nonfinite(out, false);
  if (!bad.found()) return;
  std::vector<NonFinite> held(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) held[k] = find_nonfinite(*inputs[k], false);
  if (!std::isnan(bad.value)) {
    // An infinity is this op's doing only when no input brought one and the op does not make them on purpose;
    // a NaN always is reported, wherever the first one sits.
    const NonFinite nan = find_nonfinite(out, true);
    bool inherited = infinity_by_design;
    for (const NonFinite& h : held) inherited = inherited || h.found();
    if (nan.found()) bad = nan;
    else if (inherited) return;
  }
  std::string shapes, notes;
  for (size_t k = 0; k < inputs.size(); ++k) {
    shapes += cat(k ? ", " : "", inputs[k]->defined() ? inputs[k]->shape().str() : "none");
    if (held[k].found()) notes += cat(notes.empty() ? " (" : ", ", "input ", k, " already holds ", kind(held[k].value));
  }
  if (!notes.empty()) notes += ')';
  throw AnomalyError(cat("anomaly: forward of ", op, " produced ", kind(bad.value), " (",
                         element(out.shape(), bad.index, "output"), "); inputs ", shapes, notes,
                         in_scope(current_scope_path())));
}

void check_gradient(const Node& node, size_t k, const Tensor& gradient) {
  const NonFinite bad = find_nonfinite(gradient, false);
  if (!bad.found()) return;
  throw AnomalyError(cat("anomaly: backward of ", node.name(), " produced ", kind(bad.value),
                         " in the gradient of input ", k, " (", element(gradient.shape(), bad.index, "shape"), ")",
                         in_scope(node.scope)));
}

void check_seed(const Tensor& seed) {
  const NonFinite bad = find_nonfinite(seed, false);
  if (!bad.found()) return;
  throw AnomalyError(cat("anomaly: backward: the gradient given for the output holds ", kind(bad.value), " (",
                         element(seed.shape(), bad.index, "shape"), ")"));
}

}  // namespace detail

}  // namespace tapegrad
