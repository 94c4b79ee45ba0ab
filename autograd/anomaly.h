#pragma once
// Anomaly detection: while it is on, the first op whose forward or backward produces NaN or Inf throws an
// AnomalyError naming the op, the shapes and the place in the model it ran in, as PyTorch's
// set_detect_anomaly. The checks live in two places only: record() (every op's forward passes through it,
// whether or not it records) and backward()'s walk over the tape (each entry's gradients). While it is
// off, each costs one predictable branch. docs/autograd.md, "Anomaly detection", gives the details.
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "autograd/error.h"
#include "autograd/tensor.h"

namespace tapegrad {

/// A NaN or Inf produced while anomaly detection is on. what() is one line:
///   anomaly: forward of log produced NaN (element [1,3] of output [2,4]); inputs [2,4]; in encoder.layers.1
///   anomaly: backward of sqrt produced Inf in the gradient of input 0 (element [0] of shape [3]); in head
struct AnomalyError : Error {
  using Error::Error;
};

/// Whether this thread checks every op's results for NaN and Inf (off by default). Per thread, like grad
/// mode and the tape.
bool detect_anomaly();
void set_detect_anomaly(bool on);

/// RAII: anomaly detection on (or off) while it lives, the previous state restored after.
class DetectAnomalyGuard {
 public:
  explicit DetectAnomalyGuard(bool on = true) : previous_(detect_anomaly()) { set_detect_anomaly(on); }
  ~DetectAnomalyGuard() { set_detect_anomaly(previous_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

/// RAII: names the part of the model that runs while it lives, for anomaly messages. Scopes nest and their
/// names join with '.' into a path such as "encoder.layers.1.self_attn"; an empty name adds nothing (a
/// root module). A scope entered again by the same owner while it is the innermost one adds nothing either,
/// so a module whose methods call each other appears once. Kept only while detection is on: otherwise
/// entering and leaving a scope is one branch each. Turn detection on before the forward pass, or the
/// scopes already entered are missing from the path.
class ScopeName {
 public:
  explicit ScopeName(std::string_view name, const void* owner = nullptr) {
    if (detect_anomaly()) [[unlikely]] pushed_ = push_scope(name, owner);
  }
  ~ScopeName() {
    if (pushed_) pop_scope();
  }
  ScopeName(const ScopeName&) = delete;
  ScopeName& operator=(const ScopeName&) = delete;

 private:
  static bool push_scope(std::string_view name, const void* owner);
  static void pop_scope();
  bool pushed_ = false;
};

/// This thread's scope path ("" outside every scope, or when detection was off as the scopes were entered).
std::string current_scope();

struct Node;

namespace detail {
/// The scope path that a tape entry records while detection is on (shared: one string per scope entered).
std::shared_ptr<const std::string> current_scope_path();
/// True while detection is on and no backward() runs on this thread: the ops a backward rule calls are
/// not checked one by one, the rule's gradients are (as "backward of <its op>").
bool checking_forward();
/// Throws AnomalyError when op's float output holds NaN, or ±Inf that it made: none of its float inputs
/// holds ±Inf, and the op does not produce infinities by design (masked_fill with -inf).
void check_forward(const char* op, const Tensor& out, std::span<const Tensor* const> inputs,
                   bool infinity_by_design);
/// Throws AnomalyError when the gradient of node's input k (all it has received so far, this node's part
/// included) holds NaN or ±Inf.
void check_gradient(const Node& node, size_t k, const Tensor& gradient);
/// Throws AnomalyError when the gradient given to backward() for the root holds NaN or ±Inf.
void check_seed(const Tensor& seed);

/// RAII: marks a running backward(), for checking_forward().
class BackwardRunning {
 public:
  BackwardRunning();
  ~BackwardRunning();
  BackwardRunning(const BackwardRunning&) = delete;
  BackwardRunning& operator=(const BackwardRunning&) = delete;

 private:
  bool previous_;
};
}  // namespace detail

}  // namespace tapegrad
