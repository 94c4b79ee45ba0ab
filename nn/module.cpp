#include "nn/module.h"

#include <cmath>
#include <map>
#include <set>

#include "autograd/tape.h"

namespace tapegrad::nn {

void Module::add_parameter(const std::string& name, const Tensor& value) {
  for (const auto& [existing, _] : parameters_)
    if (existing == name) throw ValueError(cat("register_parameter: ", in_quotes(name), " is registered twice"));
  parameters_.emplace_back(name, value);
}

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  value.requires_grad_();
  add_parameter(name, value);
  return value;
}

Tensor Module::register_shared_parameter(const std::string& name, const Tensor& existing) {
  // A tensor that is not yet a parameter would be trained under this name only by accident of sharing:
  // register it with register_parameter where it is made, then share it.
  if (!existing.defined() || !existing.requires_grad() || !existing.is_leaf())
    throw ValueError(cat("register_shared_parameter: '", name,
                         "' must share a registered parameter (a leaf that requires grad)"));
  add_parameter(name, existing);
  return existing;
}

void Module::collect(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, tensor] : parameters_) out.emplace_back(prefix + name, tensor);
  for (const auto& [name, child] : children_) child->collect(name.empty() ? prefix : prefix + name + ".", out);
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  collect("", out);
  return out;
}

std::vector<std::pair<std::string, const Module*>> Module::named_children() const {
  std::vector<std::pair<std::string, const Module*>> out;
  for (const auto& [name, child] : children_) {
    if (!name.empty()) {
      out.emplace_back(name, child.get());
      continue;
    }
    for (const auto& inner : child->named_children()) out.push_back(inner);
  }
  return out;
}

NamedTensors Module::named_parameters() const {
  // A shared tensor is one TensorImpl behind every name (register_shared_parameter stores the handle, and
  // to() swaps storage inside the impl), so identity of the impl is identity of the parameter.
  NamedTensors out;
  std::set<const TensorImpl*> seen;
  for (auto& [name, t] : state_dict())
    if (seen.insert(&t.impl()).second) out.emplace_back(std::move(name), std::move(t));
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::parameter_count() const {
  int64_t n = 0;
  for (auto& [_, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (auto& [_, t] : named_parameters()) t.zero_grad();
}

namespace {

/// "2 missing ('a' [3], 'b' [2,4])": one group of a load_state_dict error, empty when there is nothing.
std::string problem_group(const std::vector<std::string>& items, const char* what) {
  if (items.empty()) return "";
  std::string out = cat(items.size(), " ", what, " (");
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out + ")";
}

/// "'e.weight' and 'h.weight' are one tensor: element 3 is 0.5 and 0.25", or empty when the two entries of
/// one shared tensor hold the same values (both NaN counts as the same: the value, not a comparison).
std::string shared_difference(const std::string& first_name, const Tensor& first, const std::string& name,
                              const Tensor& t) {
  const std::vector<double> a = first.to_vector(), b = t.to_vector();
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] && !(std::isnan(a[i]) && std::isnan(b[i])))
      return cat(in_quotes(first_name), " and ", in_quotes(name), " are one tensor: element ", i, " is ", a[i], " and ", b[i]);
  return "";
}

}  // namespace

void Module::load_state_dict(const NamedTensors& state) {
  const NamedTensors own = state_dict();  // every name: a shared tensor's entry is expected under each
  std::map<std::string, Tensor> given;
  for (const auto& [name, t] : state) {
    if (!given.emplace(name, t).second) throw ValueError(cat("load_state_dict: entry ", in_quotes(name), " appears twice"));
  }
  // Check everything before changing anything, so a bad state leaves the module as it was, and name every
  // problem at once: a file from another model differs in many entries, and one at a time hides the pattern.
  std::vector<std::string> missing, unexpected, wrongly_shaped, wrongly_typed, different;
  std::set<std::string> known;
  std::map<const TensorImpl*, std::string> first_entry;  // a shared tensor -> its first well-formed entry
  for (const auto& [name, param] : own) {
    known.insert(name);
    auto it = given.find(name);
    if (it == given.end()) {
      missing.push_back(cat(in_quotes(name), " ", param.shape()));
      continue;
    }
    const Tensor& t = it->second;
    const bool shape_ok = t.shape() == param.shape();
    if (!shape_ok) wrongly_shaped.push_back(cat(in_quotes(name), ": given ", t.shape(), ", expected ", param.shape()));
    bool dtype_ok = false;
    if (!is_floating(t.dtype()))
      wrongly_typed.push_back(cat(in_quotes(name), " is ", dtype_name(t.dtype()), ", not a float"));
    else if (itemsize(t.dtype()) > itemsize(param.dtype()))  // float64 into float32 would round every value
      wrongly_typed.push_back(cat(in_quotes(name), " is ", dtype_name(t.dtype()), " and the module ",
                                  dtype_name(param.dtype()), ": narrowing would lose precision"));
    else
      dtype_ok = true;
    if (!shape_ok || !dtype_ok) continue;
    // A second name of a shared tensor: its values must be the first entry's (module.h says why).
    const auto [first, inserted] = first_entry.emplace(&param.impl(), name);
    if (inserted) continue;
    std::string difference = shared_difference(first->second, given.at(first->second), name, t);
    if (!difference.empty()) different.push_back(std::move(difference));
  }
  for (const auto& [name, t] : state)
    if (!known.count(name)) unexpected.push_back(cat(in_quotes(name), " ", t.shape()));
  if (!missing.empty() || !unexpected.empty() || !wrongly_shaped.empty() || !wrongly_typed.empty() ||
      !different.empty()) {
    std::string message = "load_state_dict:";
    const char* separator = " ";
    for (const std::string& group :
         {problem_group(missing, "missing"), problem_group(unexpected, "unexpected"),
          problem_group(wrongly_shaped, "wrongly shaped"), problem_group(wrongly_typed, "of the wrong dtype"),
          problem_group(different, "shared but different")})
      if (!group.empty()) {
        message += separator + group;
        separator = ", ";
      }
    // The most specific type when there is one kind of problem.
    if (missing.empty() && unexpected.empty() && wrongly_typed.empty() && different.empty()) throw ShapeError(message);
    if (missing.empty() && unexpected.empty() && wrongly_shaped.empty() && different.empty()) throw DTypeError(message);
    throw ValueError(message);
  }
  // float32 entries into a float64 module are widened exactly by copy_. Once per tensor: its entries agree.
  NoGradGuard no_grad;
  for (const auto& [name, param] : named_parameters()) Tensor(param).copy_(given.at(name));
}

void Module::to(DType dtype) {
  NoGradGuard no_grad;
  for (auto& [name, param] : named_parameters()) {
    if (param.dtype() == dtype) continue;
    // Every handle to this parameter shares one TensorImpl: swap its storage, not the handle.
    const Tensor converted = param.detach().to(dtype).contiguous();
    TensorImpl& impl = param.impl();
    impl.storage = converted.storage();
    impl.strides = converted.strides();
    impl.offset = converted.offset();
    impl.dtype = dtype;
    param.zero_grad();
  }
}

}  // namespace tapegrad::nn
