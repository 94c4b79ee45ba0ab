#include "nn/module.h"

#include <map>
#include <set>

#include "autograd/tape.h"

namespace tapegrad::nn {

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  for (const auto& [existing, _] : parameters_)
    if (existing == name) throw ValueError(cat("register_parameter: '", name, "' is registered twice"));
  value.requires_grad_();
  parameters_.emplace_back(name, value);
  return value;
}

void Module::collect(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, tensor] : parameters_) out.emplace_back(prefix + name, tensor);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", out);
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

void Module::load_state_dict(const NamedTensors& state) {
  const NamedTensors own = named_parameters();
  std::map<std::string, Tensor> given;
  for (const auto& [name, t] : state) {
    if (!given.emplace(name, t).second) throw ValueError(cat("load_state_dict: entry '", name, "' appears twice"));
  }
  // Check everything before changing anything, so a bad state leaves the module as it was.
  for (const auto& [name, param] : own) {
    auto it = given.find(name);
    if (it == given.end()) throw ValueError(cat("load_state_dict: missing entry '", name, "' ", param.shape()));
    if (!(it->second.shape() == param.shape()))
      throw ShapeError(cat("load_state_dict: entry '", name, "' has shape ", it->second.shape(), ", the module expects ",
                           param.shape()));
    if (!is_floating(it->second.dtype()))
      throw DTypeError(cat("load_state_dict: entry '", name, "' is ", dtype_name(it->second.dtype()), ", not a float"));
  }
  if (given.size() != own.size()) {
    std::set<std::string> known;
    for (const auto& [name, _] : own) known.insert(name);
    for (const auto& [name, t] : state)
      if (!known.count(name)) throw ValueError(cat("load_state_dict: unexpected entry '", name, "' ", t.shape()));
  }
  NoGradGuard no_grad;
  for (const auto& [name, param] : own) Tensor(param).copy_(given.at(name));
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
