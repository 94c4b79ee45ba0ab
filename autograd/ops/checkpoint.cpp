// Activation checkpointing: the forward of a function without its saved intermediates, recomputed in
// backward on a tape of its own.
#include "autograd/ops/checkpoint.h"

#include <vector>

#include "autograd/ops/dropout.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/matmul.h"
#include "autograd/ops/unary.h"
#include "autograd/registry.h"

namespace tapegrad {

// checkpoint.   y = f(x; θ), θ the parameters
// forward : y = f(x; θ), nothing of f saved but x (and the generator's state before f drew)
// backward: recompute y' = f(x'; θ) with x' a fresh leaf holding x's values and the generator rewound, so
//           y' = y exactly; then backpropagate dy through the recomputation's tape:
//             dx += dx'  = (∂y/∂x)ᵀ dy        (read from x'.grad)
//             dθ += (∂y/∂θ)ᵀ dy               (added into θ's .grad by that backward itself)
// saves   : x, fn, the generator's state, and the results fn's ops kept (KeptResults: flash attention's
//           output and log-sum-exp), which the recomputation takes instead of computing them again
namespace {
thread_local KeptResults* results_keeping = nullptr;
thread_local KeptResults* results_replaying = nullptr;
}  // namespace

KeptResults* KeptResults::keeping() { return results_keeping; }
KeptResults* KeptResults::replaying() { return results_replaying; }

void KeptResults::keep(std::initializer_list<Tensor> results) {
  if (full_ || count_ + static_cast<int>(results.size()) > kSlots) {
    full_ = true;
    return;
  }
  for (const Tensor& t : results) results_[count_++] = t;
}

const Tensor* KeptResults::take(int n) {
  if (taken_ + n > count_) return nullptr;
  taken_ += n;
  return results_.data() + taken_ - n;
}

namespace detail {

KeptResultsScope::KeptResultsScope(KeptResults* kept, Mode mode)
    : keeping_before_(results_keeping), replaying_before_(results_replaying) {
  results_keeping = mode == keep ? kept : nullptr;
  results_replaying = mode == replay ? kept : nullptr;
}

KeptResultsScope::~KeptResultsScope() {
  results_keeping = keeping_before_;
  results_replaying = replaying_before_;
}

namespace {

/// The tapes recomputations record on, one per depth of checkpoints running inside one another's
/// backward, kept for the thread's life: their entry and slot lists keep their capacity between steps.
Tape& recomputation_tape(size_t depth) {
  thread_local std::vector<std::unique_ptr<Tape>> tapes;
  while (tapes.size() <= depth) tapes.push_back(std::make_unique<Tape>());
  return *tapes[depth];
}
thread_local size_t recomputation_depth = 0;

/// The generator rewound to where the forward found it while the recomputation draws, then put back.
class RewoundGenerator {
 public:
  RewoundGenerator(Generator* rng, const Generator::State& before) : rng_(rng) {
    if (!rng_) return;
    after_ = rng_->state();
    rng_->set_state(before);
  }
  ~RewoundGenerator() {
    if (rng_) rng_->set_state(after_);
  }
  RewoundGenerator(const RewoundGenerator&) = delete;
  RewoundGenerator& operator=(const RewoundGenerator&) = delete;

 private:
  Generator* rng_;
  Generator::State after_{};
};

}  // namespace

bool checkpoint_records(const Tensor& x, std::span<const Tensor> parameters) {
  if (!grad_enabled()) return false;
  if (x.defined() && x.requires_grad()) return true;
  for (const Tensor& p : parameters)
    if (p.defined() && p.requires_grad()) return true;
  return false;
}

Tensor record_checkpoint(Tensor y, const Tensor& x, std::span<const Tensor> parameters,
                         std::unique_ptr<Recompute> fn, Generator* rng, const Generator::State& rng_before,
                         KeptResults&& kept) {
  if (!y.defined()) throw ValueError("checkpoint: the function returned an undefined tensor");
  // A handle of its own: fn may have returned x itself, or a view of it, whose autograd state the entry's
  // output must not take over.
  y = y.detach();
  auto node = std::make_unique<CheckpointNode>();
  node->inputs.reserve(1 + parameters.size());
  detail::add_edge(*node, x, CheckpointNode::kName);
  for (const Tensor& p : parameters) detail::add_edge(*node, p, CheckpointNode::kName);
  node->fn = std::move(fn);
  node->x = x;
  node->rng = rng;
  node->rng_before = rng_before;
  node->kept = std::move(kept);
  Tape::current().append(std::move(node), y);
  return y;
}

void CheckpointNode::backward(const Tensor& dout, BackwardContext& ctx) {
  Tensor leaf = x.get(kName).detach();
  if (ctx.needs_grad(0)) leaf.requires_grad_();
  Tensor recomputed;
  const size_t depth = recomputation_depth++;
  struct Leave {
    ~Leave() { --recomputation_depth; }
  } leave;
  RecordOn on(recomputation_tape(depth));
  {
    EnableGradGuard grad_on;
    RewoundGenerator rewound(rng, rng_before);
    KeptResultsScope replaying(&kept, KeptResultsScope::replay);
    recomputed = fn->run(leaf);
  }
  if (!(recomputed.shape() == dout.shape()))
    throw AutogradError(cat(kName, " backward: the recomputation gave shape ", recomputed.shape(), ", the forward ",
                            dout.shape(), ": the function is not the same on the second call"));
  if (recomputed.requires_grad()) tapegrad::backward(recomputed, dout);
  const Tensor dx = leaf.grad();
  if (dx.defined()) ctx.accumulate(0, dx);
}

}  // namespace detail

namespace {

// f(x; W) = dropout(tanh(x W), 0.3) ⊙ x[:, :n] + x W: x reaches the output through f and around it, W is
// read inside f (a parameter, its gradient added by the recomputation's backward). The generator is
// reseeded on every call of the case's function, so each evaluation drops the same elements; the
// recomputation then draws them again only if checkpoint rewinds it.
GradcheckCase checkpoint_case(std::string name, bool nested) {
  return {std::move(name), [nested](const GradcheckOptions& options) {
            Generator inputs_gen(options.seed);
            const std::vector<Tensor> inputs = make_inputs({{{3, 4}}, {{4, 4}}}, inputs_gen, options.dtype);
            auto gen = std::make_shared<Generator>();
            const TensorFn fn = [gen, nested](const std::vector<Tensor>& in) {
              gen->reseed(11);
              const Tensor w = in[1];
              const std::vector<Tensor> params = {w};
              const auto inner = [w, gen](const Tensor& x) {
                return dropout(tanh(matmul(x, w)), 0.3, /*training=*/true, *gen) * x + matmul(x, w);
              };
              const auto f = [&](const Tensor& x) {
                if (!nested) return checkpoint(inner, x, params, gen.get());
                // A checkpoint inside a checkpoint: the outer one's recomputation records the inner entry,
                // whose backward recomputes on the next tape down.
                const auto outer = [inner, params, gen](const Tensor& x) {
                  return tanh(checkpoint(inner, x, params, gen.get()));
                };
                return checkpoint(outer, x, params, gen.get());
              };
              return f(in[0]) * in[0] + matmul(in[0], in[1]);
            };
            return gradcheck(fn, inputs, options, {"x", "w"});
          }};
}

const bool registered = register_gradchecks({
    checkpoint_case("checkpoint/dropout-parameter-and-bypass", false),
    checkpoint_case("checkpoint/nested", true),
});

}  // namespace

}  // namespace tapegrad
