#pragma once
// Optimizer: the base of every update rule. It holds the parameters by name (the same handles the model
// holds, so updates land in the model's storage), walks them once per step() and hands each one that has
// a gradient to the rule. Parameters without a gradient are skipped, as in PyTorch: they neither move nor
// advance their state.
//
// State. Everything an optimizer accumulates is a named tensor, so that a checkpoint can save it and a
// fresh optimizer built with the same options can continue bit-identically:
//   "step"              float64 [1]: calls to step() so far
//   "step.<param>"      float64 [1]: updates this parameter received (PyTorch's per-parameter state["step"];
//                       it differs from "step" only when the parameter had no gradient on some step)
//   "<kind>.<param>"    per-parameter buffers of the parameter's shape and dtype, registered by the rule
//                       ("momentum_buffer.<param>", "exp_avg.<param>", "exp_avg_sq.<param>")
// Hyperparameters (lr included) are not state: they come from the options the optimizer is built with.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/named_registry.h"
#include "autograd/tensor.h"

namespace tapegrad::optim {

/// (name, parameter) pairs, exactly what nn::Module::named_parameters() returns.
using NamedParameters = std::vector<std::pair<std::string, Tensor>>;
/// (name, tensor) pairs of optimizer state.
using NamedTensors = NamedParameters;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter whose grad is defined, in place and in the parameter's own dtype,
  /// under NoGradGuard. A grad of another shape or dtype than its parameter is a ShapeError/DTypeError.
  virtual void step();
  /// Drops every parameter's grad (Tensor::zero_grad), so the next backward starts from nothing.
  void zero_grad();

  /// The learning rate the next step() uses.
  double lr() const { return lr_; }
  /// Sets the learning rate (a schedule calls this before each step); ValueError unless finite and >= 0.
  void set_lr(double lr);
  /// Calls to step() so far (restored by load_state).
  int64_t step_count() const { return steps_; }

  /// "SGD", "Adam", "AdamW": names the optimizer in error messages.
  const char* name() const { return name_; }
  /// The parameters it updates, by name, in the order it was given them.
  const NamedParameters& parameters() const { return params_; }

  /// A snapshot (fresh copies) of every state tensor by its stable name; see the header comment.
  NamedTensors state() const;
  /// Restores a snapshot taken by state() of an optimizer of the same kind over the same parameters.
  /// Exactly the expected entries must be present. One error names every missing, unexpected, wrongly
  /// shaped and wrongly typed entry ("Adam load_state: 1 missing ('exp_avg.w' [3,4]), 1 unexpected (...)"):
  /// a ShapeError when only shapes are wrong, a DTypeError when only dtypes are (a float32 buffer widens
  /// into a float64 optimizer; float64 into float32 is refused), a ValueError otherwise and for a
  /// duplicated entry or a bad step count. Everything is checked before anything is written, so a failed
  /// load changes nothing.
  void load_state(const NamedTensors& state);

 protected:
  /// Checks the parameters (named, unique, defined, contiguous floating leaves) and the learning rate.
  Optimizer(const char* name, NamedParameters params, double lr);

  /// Registers one zero-filled state tensor per parameter (its shape and dtype), listed in state() as
  /// "<kind>.<parameter name>"; returns the handles in parameter order for the rule to keep.
  std::vector<Tensor> add_state(const std::string& kind);

  /// Updates parameter i (contiguous) from its gradient (contiguous, same shape and dtype). Called by
  /// step() under NoGradGuard after the parameter's update count was incremented, so
  /// updates_of(i) == 1 on its first update.
  virtual void update(size_t i, const Tensor& grad) = 0;

  /// The i-th parameter.
  const Tensor& param(size_t i) const { return params_[i].second; }
  /// Updates parameter i has received, this one included while update(i, ...) runs.
  int64_t updates_of(size_t i) const { return updates_[i]; }

 private:
  const char* name_;
  NamedParameters params_;
  double lr_;
  int64_t steps_ = 0;
  std::vector<int64_t> updates_;  // per parameter: its "step.<name>"
  NamedTensors buffers_;          // every add_state tensor under its state() name
  std::vector<Tensor> grads_;     // step()'s checked gradients, kept so that a step allocates nothing
};

// ---- choosing an optimizer by name ----
// Each update rule registers itself in its own file (sgd.cpp: "sgd"; adam.cpp: "adam", "adamw"), as a user's
// program registers its own:
//   static const bool registered = register_optimizer({.name = "lion", .help = "...", .make = ...});
// The trainer builds TrainOptions::optimizer through it; the command line offers every registered name.

/// What a run chooses for any optimizer; each rule reads the ones it has (momentum: sgd only) and keeps its
/// own defaults for the rest (Adam's betas and eps).
struct Hyperparameters {
  double lr = 1e-3;
  double weight_decay = 0;
  double momentum = 0;
};

struct OptimizerEntry {
  std::string name = {}, help = {};
  /// The optimizer over params; ValueError (naming the option) for hyperparameters it cannot take.
  std::function<std::unique_ptr<Optimizer>(NamedParameters params, const Hyperparameters&)> make = {};
  bool uses_momentum = false;  // it reads Hyperparameters::momentum (the command line refuses --momentum otherwise)
  /// The buffers of a parameter's size it keeps per parameter, at most (add_state's kinds): what train's
  /// memory check counts beside the weights and their gradients. Unknown: 2, as Adam's moments (errs high).
  int state_buffers = 2;
};

/// Adds an optimizer; a missing name or make, or a name registered before, is a ValueError. Returns true, so
/// that a file registers at load time.
bool register_optimizer(OptimizerEntry entry);
/// The registered optimizers, in registration order (the library's files load adam.cpp's before sgd.cpp's):
/// optimizers().at("adamw") (ValueError "unknown optimizer 'x' (registered: adam, adamw or sgd)" for a name no
/// loaded code registered), .names(), .choices().
const NamedRegistry<OptimizerEntry>& optimizers();

/// Throws ValueError "<optimizer>: <option> must be <requirement>, got <value>" unless ok.
void check_option(bool ok, const char* optimizer, const char* option, const char* requirement, double value);

}  // namespace tapegrad::optim
