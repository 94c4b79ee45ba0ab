#pragma once
// Mixture of experts: the ffn component "moe". E expert feed-forward blocks (each exactly the "dense" block,
// width F) and a gate; each token goes through the k experts its gate ranks highest.
//   p      = softmax(gate(x))                       (N, E)   N = B·T tokens
//   K(n)   = the k largest p[n, e]                  (a non-differentiable index choice; ties: lower e first)
//   g[n,e] = p[n, e] / Σ_{e' ∈ K(n)} p[n, e']       for e ∈ K(n), k > 1: the kept gates renormalised to sum to 1
//   g[n,e] = p[n, e]                                 for k = 1: the raw gate probability (Switch Transformer)
//   y[n]   = Σ_{e ∈ K(n)} g[n, e] · expert_e(x[n])
// The gradient reaches the gate through the kept g (and so through every logit of the softmax) and each
// expert through the tokens routed to it; the choice K itself has no gradient. At k = 1 renormalising would
// give g = p / p = 1, a constant: the task loss would give the gate no gradient and, without the
// load-balancing loss, the router would never learn. The raw p keeps dL/dp[n, e] = <dy[n], expert_e(x[n])>.
// Load balancing (Switch Transformer, Fedus et al. 2021, eq. 4, with top-k counts):
//   f_e = |{(n, j): the j-th choice of token n is e}| / (k · N')     fraction of routed slots (constant)
//   P_e = Σ_n p[n, e] / N'                                           mean gate probability (differentiable)
//   aux = E · Σ_e f_e · P_e          (1 when routing is uniform; it grows as tokens crowd onto few experts)
// over the N' tokens that are not padding. auxiliary_loss() returns aux_loss_weight · aux of the last forward (the ffn setting "aux_weight", --moe-aux-weight).
// Children: "gate" (Linear C -> E, with bias), "experts" ("experts.0.linear1.weight", ...).
// Letters: B batch, T positions, C = d_model, F = d_ff, E experts, k = top_k.
#include <cstdint>
#include <memory>
#include <vector>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/components.h"
#include "nn/feed_forward.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace tapegrad::nn {

struct MixtureOfExpertsOptions {
  FeedForwardOptions expert;     // every expert's: C, F, activation, dropout
  int64_t experts = 4;           // E >= 1
  int64_t top_k = 2;             // k in [1, E]
  double aux_loss_weight = 0.01;  // of the load-balancing loss in auxiliary_loss(); >= 0
};

/// The experts, children named "0", "1", ... (as a PyTorch nn.ModuleList), so their parameters read
/// "experts.0.linear1.weight".
class ExpertList : public Module {
 public:
  FeedForward& append(std::unique_ptr<FeedForward> expert);
  size_t size() const { return experts_.size(); }
  const FeedForward& operator[](size_t i) const { return *experts_.at(i); }

 private:
  std::vector<FeedForward*> experts_;  // owned by the children list
};

/// Which experts each token chose: the routing of one forward, read from the gate probabilities' values.
struct Routing {
  int64_t tokens = 0, top_k = 0;
  std::vector<int64_t> choice;  // (N, k) row-major: token n's j-th expert, by decreasing probability
};

/// The top_k experts of each row of probs, largest first (ties to the lower index).   probs: (N, E) -> Routing
Routing route_top_k(const Tensor& probs, int64_t top_k);

/// The load-balancing loss E · Σ_e f_e · P_e of the header, over the tokens where keep is true (all when keep
/// is empty); 0 (still on the graph) when no token is kept.   probs: (N, E), routing of N tokens -> () scalar
Tensor load_balancing_loss(const Tensor& probs, const Routing& routing, const std::vector<bool>& keep = {});

class MixtureOfExperts : public FeedForwardBlock {
 public:
  /// The gate, then experts 0..E-1, initialised from gen; dropout_rng is the model's dropout stream (may be
  /// null when the experts' dropout is 0). Bad options are a ValueError naming the field.
  MixtureOfExperts(const MixtureOfExpertsOptions& options, Generator& gen, std::shared_ptr<Generator> dropout_rng);

  /// forward_masked(x, {}): every token counts in the load-balancing statistics.   x: (..., C) -> (..., C)
  Tensor forward(const Tensor& x) const override;
  /// The routed sum of the header, for every position (pads included); the load-balancing loss leaves the
  /// pads out. key_padding_mask: bool (B, T), true = pad, or undefined.   x: (B, T, C) -> (B, T, C)
  Tensor forward_masked(const Tensor& x, const Tensor& key_padding_mask) const override;
  /// aux_loss_weight · the load-balancing loss of the last forward (undefined before the first).  -> ()
  Tensor auxiliary_loss() const override;
  bool has_auxiliary_loss() const override { return true; }

  /// The unweighted load-balancing loss of the last forward (undefined before the first).   -> ()
  const Tensor& load_balancing() const { return load_balancing_; }
  /// The gate probabilities p of the last forward.   -> (N, E)
  const Tensor& gate_probabilities() const { return gate_probabilities_; }
  /// The routing of the last forward.
  const Routing& routing() const { return routing_; }

  const MixtureOfExpertsOptions& options() const { return options_; }
  const Linear& gate() const { return *gate_; }
  const ExpertList& experts() const { return *experts_; }

 private:
  MixtureOfExpertsOptions options_;
  Linear* gate_;         // owned by the children list
  ExpertList* experts_;  // owned by the children list
  // What the last forward leaves for the trainer (auxiliary_loss) and for inspection.
  mutable Tensor load_balancing_;
  mutable Tensor gate_probabilities_;
  mutable Routing routing_;
};

}  // namespace tapegrad::nn
