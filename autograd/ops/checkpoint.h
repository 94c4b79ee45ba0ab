#pragma once
// Activation checkpointing (PyTorch's torch.utils.checkpoint): y = fn(x) keeps none of fn's intermediates
// for backward and computes them again there. The forward runs fn without recording; one tape entry stands
// for all of it and saves x alone. Its backward runs fn(x) once more, recording on a tape of its own, and
// backpropagates dy through that tape. Memory: x instead of everything fn's ops save (a transformer
// layer's activations, about 14 tensors of x's size); time: one more forward of fn.
#include <array>
#include <initializer_list>
#include <memory>
#include <span>
#include <utility>

#include "autograd/random.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"

namespace tapegrad {

/// y = fn(x), fn's intermediates recomputed in backward (above). Recorded when grad mode is on and x or
/// one of `parameters` requires grad; otherwise simply fn(x).
/// - parameters: every tensor requiring grad that fn reads besides x (a module's parameters). The
///   recomputation's backward adds their gradients into their .grad; the entry lists them as inputs, so
///   that whoever watches the tape (data-parallel reduction) knows which entry completes them.
/// - rng: the generator fn draws from (dropout), or null. It is rewound for the recomputation, which then
///   draws the same numbers as the forward, and afterwards left where it was.
/// fn is kept by value until backward and must compute the same function both times: anything else it
/// reads (masks, settings) may not change in between. Its result may not be one of its inputs.
///   x: any -> fn's result
template <class Fn>
Tensor checkpoint(Fn fn, const Tensor& x, std::span<const Tensor> parameters, Generator* rng = nullptr);

/// Results that a checkpointed function's ops keep for its recomputation instead of computing them again
/// (selective recomputation): flash attention keeps its output and log-sum-exp, O(T·D) numbers a head
/// that cost O(T²·D) work, a third of a long-sequence layer's forward. During the checkpoint's forward an
/// op offers its results to keep(); during the recomputation take() gives them back in the same order, so
/// the op records its tape entry on them without running its kernels. The slots are a fixed array (no
/// allocation per step); results past them are simply recomputed.
class KeptResults {
 public:
  static constexpr int kSlots = 8;
  /// The results the current checkpoint's forward keeps, or null (outside one, or in its recomputation).
  static KeptResults* keeping();
  /// The results the current recomputation gives back, or null.
  static KeptResults* replaying();
  /// Keeps `results` when every one of them fits, else none (and none after: the order must hold).
  void keep(std::initializer_list<Tensor> results);
  /// The next n kept results in keep()'s order, or null when they were not kept.
  const Tensor* take(int n);

 private:
  std::array<Tensor, kSlots> results_;
  int count_ = 0, taken_ = 0;
  bool full_ = false;
};

// ---- implementation ----
namespace detail {

/// While alive, this thread's checkpoint forward keeps into `kept` (and nothing is given back), or its
/// recomputation gives back from `kept` (and nothing is kept); the previous state returns afterwards, so a
/// checkpoint inside another's function keeps its own results.
class KeptResultsScope {
 public:
  enum Mode { keep, replay };
  KeptResultsScope(KeptResults* kept, Mode mode);
  ~KeptResultsScope();
  KeptResultsScope(const KeptResultsScope&) = delete;
  KeptResultsScope& operator=(const KeptResultsScope&) = delete;

 private:
  KeptResults *keeping_before_, *replaying_before_;
};

/// What the entry needs to run fn again: calls its fn on the recomputation's leaf.
struct Recompute {
  virtual ~Recompute() = default;
  virtual Tensor run(const Tensor& x) const = 0;
};

/// The tape entry of checkpoint(): inputs x and then the parameters.
struct CheckpointNode : NodeOf<CheckpointNode> {
  static constexpr const char* kName = "checkpoint";
  std::unique_ptr<Recompute> fn;
  Saved x;
  Generator* rng = nullptr;
  Generator::State rng_before{};  // the generator as the forward found it
  KeptResults kept;               // what fn's ops kept for the recomputation
  void backward(const Tensor& dout, BackwardContext& ctx) override;
};

bool checkpoint_records(const Tensor& x, std::span<const Tensor> parameters);
/// Records the entry for y = fn(x) computed without recording (its ops' results in `kept`); returns y as
/// the entry's output.
Tensor record_checkpoint(Tensor y, const Tensor& x, std::span<const Tensor> parameters,
                         std::unique_ptr<Recompute> fn, Generator* rng, const Generator::State& rng_before,
                         KeptResults&& kept);

template <class Fn>
struct RecomputeOf final : Recompute {
  explicit RecomputeOf(Fn f) : fn(std::move(f)) {}
  Tensor run(const Tensor& x) const override { return fn(x); }
  // Made and dropped once per call, every step: pool memory, as tape entries (no heap allocation).
  static void* operator new(size_t bytes) { return pool_allocate(bytes); }
  static void operator delete(void* p, size_t bytes) noexcept { pool_release(p, bytes); }
  Fn fn;
};

}  // namespace detail

template <class Fn>
Tensor checkpoint(Fn fn, const Tensor& x, std::span<const Tensor> parameters, Generator* rng) {
  if (!detail::checkpoint_records(x, parameters)) return fn(x);
  const Generator::State rng_before = rng ? rng->state() : Generator::State{};
  Tensor y;
  KeptResults kept;
  {
    NoGradGuard no_grad;
    detail::KeptResultsScope keeping(&kept, detail::KeptResultsScope::keep);
    y = fn(x);
  }
  return detail::record_checkpoint(std::move(y), x, parameters,
                                   std::make_unique<detail::RecomputeOf<Fn>>(std::move(fn)), rng, rng_before,
                                   std::move(kept));
}

}  // namespace tapegrad
