#pragma once
// Module: a layer with named parameters and named submodules, as PyTorch's nn.Module. Names are
// hierarchical ("encoder.layers.0.self_attn.in_proj_weight") and the state dictionary uses exactly
// the names and layouts PyTorch's state_dict() would, so weights move between the two.
// Adding a layer is one class: register its parameters and children by name in its constructor.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/anomaly.h"
#include "autograd/tensor.h"

namespace tapegrad::nn {

/// (name, tensor) pairs in registration order: parameters, state dictionaries.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  // Movable, not copyable: children live on the heap, so moving a parent keeps references to them valid.
  Module(Module&&) = default;
  Module& operator=(Module&&) = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// Every parameter, depth first in registration order, with hierarchical names. A tensor registered under
  /// several names (register_shared_parameter: tied weights) is listed once, under its first name, as
  /// PyTorch's named_parameters() lists it: this is what the optimizer, gradient clipping, the data-parallel
  /// averager and zero_grad walk, and each must see one tensor once (twice would mean two updates per step).
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  /// Total number of parameter elements, a shared tensor counted once.
  int64_t parameter_count() const;
  /// The name this module was registered under in its parent ("self_attn", "1"); empty for a root.
  const std::string& name() const { return name_; }
  /// Names this module in anomaly messages while the returned scope lives, so that they read like
  /// parameter names ("encoder.layers.1.self_attn"). Every forward begins with
  ///   const ScopeName scope = enter_scope();
  /// (one branch while anomaly detection is off; nested calls into the same module add nothing).
  ScopeName enter_scope() const { return ScopeName(name_, this); }

  /// The parameters registered by this module itself, not by its children.
  const NamedTensors& own_parameters() const { return parameters_; }
  /// Direct children by name (an inline child has the empty name).
  const std::vector<std::pair<std::string, std::unique_ptr<Module>>>& children() const { return children_; }
  /// Direct children by name as PyTorch's named_children() lists them: an inline child's own children
  /// stand in its place.
  std::vector<std::pair<std::string, const Module*>> named_children() const;

  /// Training mode (dropout active) for this module and every submodule.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  /// Drops the gradient of every parameter.
  void zero_grad();

  /// name -> tensor for every registered name (the tensors share storage with the module): a shared tensor
  /// appears under each of its names, as in PyTorch's state_dict(), whose load_state_dict(strict=True)
  /// expects every name.
  NamedTensors state_dict() const;
  /// Copies every entry into the parameter of the same name; a float32 entry into a float64 parameter is
  /// widened exactly. Every name of state_dict() must be given, a shared tensor's under each of its names,
  /// and those entries must hold the same values: PyTorch would silently keep the last, but two different
  /// entries for one tensor come from a model that was not tied (or a file edited by hand), and keeping either
  /// would throw away the other's training. One error names every problem: "load_state_dict: 2 missing ('a'
  /// [3], ...), 1 unexpected ('b' [2]), 1 wrongly shaped ('c': given [3,4], expected [2,4]), 1 of the wrong
  /// dtype ('d' is int64, not a float), 1 shared but different ('e.weight' and 'h.weight' are one tensor:
  /// element 3 is 0.5 and 0.25)"; a float64 entry into a float32 parameter is refused too (it would lose
  /// precision). A ShapeError when only shapes are wrong, a DTypeError when only dtypes are, a ValueError
  /// otherwise (and for a duplicated entry); nothing is changed then.
  void load_state_dict(const NamedTensors& state);
  /// Converts every parameter to dtype in place (float64 for gradient checks).
  void to(DType dtype);

 protected:
  /// Registers a parameter under name; it becomes a leaf that requires grad. Returns the stored handle.
  Tensor register_parameter(const std::string& name, Tensor value);
  /// Registers under name a parameter already registered elsewhere in the model (weight tying, as PyTorch's
  /// `head.weight = embed.weight`): the same tensor, not a copy, so both names read and update one set of
  /// values and its gradient sums both uses (a backward only adds). state_dict() lists it under every name,
  /// named_parameters() once. existing must be a leaf that requires grad (a ValueError otherwise).
  Tensor register_shared_parameter(const std::string& name, const Tensor& existing);
  /// Registers and owns a submodule; returns a reference that stays valid for the module's lifetime.
  template <class M>
  M& register_module(const std::string& name, std::unique_ptr<M> child) {
    M& ref = *child;
    static_cast<Module&>(ref).name_ = name;
    children_.emplace_back(name, std::move(child));
    return ref;
  }
  /// Registers and owns a submodule whose parameters and children are named as this module's own
  /// ("linear1.weight", not "ffn.linear1.weight"): a variant that must keep the names PyTorch gives the
  /// same parameters (the dense feed-forward block inside nn.TransformerEncoderLayer).
  template <class M>
  M& register_inline(std::unique_ptr<M> child) {
    return register_module("", std::move(child));
  }

 private:
  void add_parameter(const std::string& name, const Tensor& value);  // refuses a name registered twice
  void collect(const std::string& prefix, NamedTensors& out) const;   // every name, shared tensors under each
  std::string name_;  // as registered in the parent
  NamedTensors parameters_;
  std::vector<std::pair<std::string, std::unique_ptr<Module>>> children_;
  bool training_ = true;
};

/// RAII: the module in eval mode (dropout off) while this lives, then back in the mode it had, however the
/// scope ends: inference inside training (validation) or on a model a caller may be training.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(Module& module) : module_(module), was_training_(module.is_training()) { module.eval(); }
  ~EvalModeGuard() { module_.train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

}  // namespace tapegrad::nn
