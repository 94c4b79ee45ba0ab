#include "optim/optimizer.h"

#include <cmath>
#include <map>
#include <set>

#include "autograd/tape.h"

namespace tapegrad::optim {

namespace {

NamedRegistry<OptimizerEntry>& registry() {
  static NamedRegistry<OptimizerEntry> all("optimizer", "register_optimizer");
  return all;
}

}  // namespace

bool register_optimizer(OptimizerEntry entry) {
  if (!entry.name.empty() && !entry.make)
    throw ValueError(cat("register_optimizer: optimizer '", entry.name, "' lacks make"));
  return registry().add(std::move(entry));
}

const NamedRegistry<OptimizerEntry>& optimizers() { return registry(); }

void check_option(bool ok, const char* optimizer, const char* option, const char* requirement, double value) {
  if (!ok) throw ValueError(cat(optimizer, ": ", option, " must be ", requirement, ", got ", value));
}

Optimizer::Optimizer(const char* name, NamedParameters params, double lr)
    : name_(name), params_(std::move(params)), lr_(lr), updates_(params_.size(), 0) {
  check_option(std::isfinite(lr) && lr >= 0, name_, "lr", "finite and >= 0", lr);
  if (params_.empty()) throw ValueError(cat(name_, ": got an empty parameter list"));
  std::set<std::string> names;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [pname, p] = params_[i];
    if (pname.empty()) throw ValueError(cat(name_, ": parameter ", i, " has an empty name"));
    if (!names.insert(pname).second) throw ValueError(cat(name_, ": parameter name '", pname, "' appears twice"));
    if (!p.defined()) throw ValueError(cat(name_, ": parameter '", pname, "' is an undefined tensor"));
    if (!is_floating(p.dtype()))
      throw DTypeError(cat(name_, ": parameter '", pname, "' is ", dtype_name(p.dtype()),
                           "; only float32 and float64 tensors can be optimized"));
    if (!p.is_leaf())
      throw ValueError(cat(name_, ": parameter '", pname, "' is not a leaf (an op on the tape produced it)"));
    if (!p.is_contiguous())
      throw ValueError(cat(name_, ": parameter '", pname, "' of shape ", p.shape(), " is not contiguous"));
    // Two handles on the same elements would be updated twice per step (tied weights must be listed once).
    for (size_t j = 0; j < i; ++j) {
      const Tensor& q = params_[j].second;
      if (q.storage() == p.storage() && q.offset() == p.offset())
        throw ValueError(cat(name_, ": parameters '", params_[j].first, "' and '", pname,
                             "' are the same tensor; list shared weights once"));
    }
  }
}

void Optimizer::set_lr(double lr) {
  check_option(std::isfinite(lr) && lr >= 0, name_, "lr", "finite and >= 0", lr);
  lr_ = lr;
}

std::vector<Tensor> Optimizer::add_state(const std::string& kind) {
  std::vector<Tensor> handles;
  handles.reserve(params_.size());
  for (const auto& [pname, p] : params_) {
    Tensor buffer = zeros(p.shape(), p.dtype());
    buffers_.emplace_back(kind + "." + pname, buffer);
    handles.push_back(buffer);
  }
  return handles;
}

void Optimizer::step() {
  NoGradGuard no_grad;
  // Check every grad before touching anything, so a bad one leaves the whole model as it was.
  std::vector<Tensor>& grads = grads_;
  grads.assign(params_.size(), Tensor());
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [pname, p] = params_[i];
    const Tensor grad = p.grad();
    if (!grad.defined()) continue;
    if (!(grad.shape() == p.shape()))
      throw ShapeError(
          cat(name_, " step: grad of '", pname, "' has shape ", grad.shape(), ", the parameter ", p.shape()));
    if (grad.dtype() != p.dtype())
      throw DTypeError(cat(name_, " step: grad of '", pname, "' is ", dtype_name(grad.dtype()), ", the parameter ",
                           dtype_name(p.dtype())));
    grads[i] = grad.contiguous();
  }
  ++steps_;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!grads[i].defined()) continue;
    ++updates_[i];
    update(i, grads[i]);
    ++params_[i].second.storage()->version;  // an in-place write: a tape entry that saved p must not read it
  }
  grads.assign(params_.size(), Tensor());  // hold no gradient past the step
}

void Optimizer::zero_grad() {
  for (const auto& named : params_) named.second.zero_grad();
}

namespace {

Tensor count_tensor(int64_t count) { return tensor({static_cast<double>(count)}, Shape{1}, DType::float64); }

// A saved count: one element holding a non-negative integer that a double represents exactly.
int64_t read_count(const Tensor& t, const char* optimizer, const std::string& entry) {
  if (t.numel() != 1)
    throw ShapeError(cat(optimizer, " load_state: entry '", entry, "' must hold one element, got shape ", t.shape()));
  const double value = t.item();
  if (!(value >= 0 && value <= 9007199254740992.0 && value == std::floor(value)))  // 2^53
    throw ValueError(
        cat(optimizer, " load_state: entry '", entry, "' must be a non-negative integer count, got ", value));
  return static_cast<int64_t>(value);
}

}  // namespace

NamedTensors Optimizer::state() const {
  NoGradGuard no_grad;
  NamedTensors out;
  out.reserve(1 + params_.size() + buffers_.size());
  out.emplace_back("step", count_tensor(steps_));
  for (size_t i = 0; i < params_.size(); ++i) out.emplace_back("step." + params_[i].first, count_tensor(updates_[i]));
  for (const auto& [bname, buffer] : buffers_) out.emplace_back(bname, buffer.clone());
  return out;
}

void Optimizer::load_state(const NamedTensors& state) {
  std::map<std::string, const Tensor*> given;
  for (const auto& [ename, t] : state) {
    if (!given.emplace(ename, &t).second)
      throw ValueError(cat(name_, " load_state: entry '", ename, "' appears twice"));
    if (!t.defined()) throw ValueError(cat(name_, " load_state: entry '", ename, "' is an undefined tensor"));
  }
  // Every expected entry with its shape and dtype: the counts, then the buffers.
  struct Expected {
    std::string name;
    Shape shape;
    DType dtype;
  };
  std::vector<Expected> expected;
  expected.push_back({"step", Shape{1}, DType::float64});
  for (const auto& [pname, _] : params_) expected.push_back({"step." + pname, Shape{1}, DType::float64});
  for (const auto& [bname, buffer] : buffers_) expected.push_back({bname, buffer.shape(), buffer.dtype()});

  // Check everything first, naming every problem at once; write only once the whole state is known to fit.
  std::vector<std::string> missing, wrongly_shaped, wrongly_typed, unexpected;
  std::vector<const Tensor*> found(expected.size(), nullptr);
  for (size_t k = 0; k < expected.size(); ++k) {
    const Expected& e = expected[k];
    auto it = given.find(e.name);
    if (it == given.end()) {
      missing.push_back(cat("'", e.name, "' ", e.shape));
      continue;
    }
    const Tensor& t = *it->second;
    given.erase(it);
    found[k] = &t;
    const bool is_count = k <= params_.size();
    // A count is one element of any float dtype; a buffer has exactly its parameter's shape, and a
    // float32 buffer widens exactly into a float64 optimizer (float64 into float32 would round).
    if (is_count ? t.numel() != 1 : !(t.shape() == e.shape))
      wrongly_shaped.push_back(cat("'", e.name, "': given ", t.shape(), ", expected ", e.shape));
    if (!is_floating(t.dtype()) || (!is_count && itemsize(t.dtype()) > itemsize(e.dtype)))
      wrongly_typed.push_back(cat("'", e.name, "' is ", dtype_name(t.dtype()), ", expected ", dtype_name(e.dtype)));
  }
  for (const auto& [ename, t] : given) unexpected.push_back(cat("'", ename, "' ", t->shape()));
  if (!missing.empty() || !unexpected.empty() || !wrongly_shaped.empty() || !wrongly_typed.empty()) {
    std::string message = cat(name_, " load_state:");
    const char* separator = " ";
    const auto group = [&](const std::vector<std::string>& items, const char* what) {
      if (items.empty()) return;
      message += cat(separator, items.size(), " ", what, " (");
      for (size_t i = 0; i < items.size(); ++i) message += (i ? ", " : "") + items[i];
      message += ")";
      separator = ", ";
    };
    group(missing, "missing");
    group(unexpected, "unexpected");
    group(wrongly_shaped, "wrongly shaped");
    group(wrongly_typed, "of the wrong dtype");
    if (!missing.empty() || !unexpected.empty())
      message += cat("; this optimizer's state has ", expected.size(),
                     " entries: step, step.<param> and its buffers (was it saved by another optimizer or model?)");
    if (missing.empty() && unexpected.empty() && wrongly_typed.empty()) throw ShapeError(message);
    if (missing.empty() && unexpected.empty() && wrongly_shaped.empty()) throw DTypeError(message);
    throw ValueError(message);
  }

  const int64_t steps = read_count(*found[0], name_, "step");
  std::vector<int64_t> updates(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) updates[i] = read_count(*found[1 + i], name_, expected[1 + i].name);

  NoGradGuard no_grad;
  steps_ = steps;
  updates_ = updates;
  for (size_t k = 0; k < buffers_.size(); ++k) buffers_[k].second.copy_(*found[1 + params_.size() + k]);
}

}  // namespace tapegrad::optim
