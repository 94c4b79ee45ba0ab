// Mixture of experts (see moe.h for the math). A composition of existing ops; no backward code.
//
// How the experts run: each expert sees only the tokens routed to it. Its rows are gathered with embedding
// (rows of the (N, C) tokens by id, whose backward is the scatter-add into those rows), the E outputs are
// stacked into one (N·k, C) tensor, and each token's k outputs are gathered back from it by slot, again
// with embedding. The experts therefore do the work of k dense blocks, not E: computing every expert on
// every token and masking would cost E/k times the expert work (2x at the defaults E = 4, k = 2, and
// growing with E), while the gathers cost O(N·k·C), small beside an expert's O(N·k·C·F).
#include "nn/moe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/indexing.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/softmax.h"
#include "autograd/ops/views.h"
#include "nn/encoder.h"
#include "nn/module_gradcheck.h"

namespace tapegrad::nn {

namespace {
const MixtureOfExpertsOptions& checked(const MixtureOfExpertsOptions& o) {
  if (o.experts < 1) throw ValueError(cat("MixtureOfExperts: experts must be >= 1, got ", o.experts));
  if (o.top_k < 1 || o.top_k > o.experts)
    throw ValueError(cat("MixtureOfExperts: top_k = ", o.top_k, " is outside [1, experts = ", o.experts, "]"));
  if (!(std::isfinite(o.aux_loss_weight) && o.aux_loss_weight >= 0))
    throw ValueError(cat("MixtureOfExperts: aux_loss_weight must be finite and >= 0, got ", o.aux_loss_weight));
  return o;
}
}  // namespace

FeedForward& ExpertList::append(std::unique_ptr<FeedForward> expert) {
  FeedForward& added = register_module(std::to_string(experts_.size()), std::move(expert));
  experts_.push_back(&added);
  return added;
}

Routing route_top_k(const Tensor& probs, int64_t top_k) {
  if (probs.dim() != 2) throw ShapeError(cat("route_top_k: probs ", probs.shape(), " must be (N, E)"));
  const int64_t N = probs.size(0), E = probs.size(1);
  if (top_k < 1 || top_k > E) throw ValueError(cat("route_top_k: top_k = ", top_k, " is outside [1, E = ", E, "]"));
  // The choice reads values only: it is an index, not a function the tape differentiates.
  const Tensor values = probs.detach().to(DType::float64).contiguous();
  const double* p = values.data<double>();
  Routing routing{N, top_k, std::vector<int64_t>(static_cast<size_t>(N * top_k))};
  std::vector<int64_t> order(static_cast<size_t>(E));
  for (int64_t n = 0; n < N; ++n) {
    const double* row = p + n * E;
    std::iota(order.begin(), order.end(), 0);
    // A strict total order (ties to the lower expert), so the routing is deterministic.
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                      [row](int64_t a, int64_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    std::copy(order.begin(), order.begin() + top_k, routing.choice.begin() + n * top_k);
  }
  return routing;
}

// The gradient reaches the gate only through P (f is a count of index choices): dP_e/dp[n, e] = 1/N' at the
// tokens kept, so d aux / d p[n, e] = E · f_e / N'.
Tensor load_balancing_loss(const Tensor& probs, const Routing& routing, const std::vector<bool>& keep) {
  if (probs.dim() != 2 || probs.size(0) != routing.tokens)
    throw ShapeError(cat("load_balancing_loss: probs ", probs.shape(), " must be (N, E) with N = ", routing.tokens,
                         " routed tokens"));
  if (!keep.empty() && static_cast<int64_t>(keep.size()) != routing.tokens)
    throw ShapeError(cat("load_balancing_loss: keep has ", keep.size(), " entries for ", routing.tokens, " tokens"));
  const int64_t N = routing.tokens, E = probs.size(1), k = routing.top_k;
  std::vector<double> counts(static_cast<size_t>(E), 0.0), weight(static_cast<size_t>(N), 0.0);
  int64_t kept = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (!keep.empty() && !keep[n]) continue;
    ++kept;
    for (int64_t j = 0; j < k; ++j) counts[routing.choice[n * k + j]] += 1;
  }
  if (kept == 0) return sum(probs) * 0.0;  // nothing to balance; a zero that keeps the gate on the graph
  for (int64_t n = 0; n < N; ++n) weight[n] = keep.empty() || keep[n] ? 1.0 / static_cast<double>(kept) : 0.0;
  for (double& c : counts) c /= static_cast<double>(k * kept);  // f_e: the kept slots' fractions, sum 1
  const Tensor f = tensor(counts, {E}, probs.dtype());
  const Tensor P = sum(probs * tensor(weight, {N, 1}, probs.dtype()), 0);  // (E): mean over the kept tokens
  return sum(P * f) * static_cast<double>(E);
}

MixtureOfExperts::MixtureOfExperts(const MixtureOfExpertsOptions& options, Generator& gen,
                                   std::shared_ptr<Generator> dropout_rng)
    : options_(checked(options)),
      gate_(&register_module("gate", std::make_unique<Linear>(options.expert.d_model, options.experts, true, gen))),
      experts_(&register_module("experts", std::make_unique<ExpertList>())) {
  for (int64_t e = 0; e < options.experts; ++e)
    experts_->append(std::make_unique<FeedForward>(options.expert, gen, dropout_rng));
}

Tensor MixtureOfExperts::forward(const Tensor& x) const { return forward_masked(x, {}); }

Tensor MixtureOfExperts::forward_masked(const Tensor& x, const Tensor& key_padding_mask) const {
  const ScopeName scope = enter_scope();
  const int64_t C = options_.expert.d_model, E = options_.experts, k = options_.top_k;
  if (x.dim() < 1 || x.size(-1) != C)
    throw ShapeError(cat("MixtureOfExperts: x ", x.shape(), " must be (..., C) with C = d_model = ", C));
  const int64_t N = x.numel() / C;
  std::vector<bool> keep;  // empty: every token counts in the load-balancing statistics
  if (key_padding_mask.defined()) {
    if (key_padding_mask.dtype() != DType::boolean || x.dim() != 3 || key_padding_mask.dim() != 2 ||
        key_padding_mask.size(0) != x.size(0) || key_padding_mask.size(1) != x.size(1))
      throw ShapeError(cat("MixtureOfExperts: key_padding_mask ", key_padding_mask.shape(),
                           " must be bool (B, T) for x ", x.shape(), " (B, T, C)"));
    const Tensor pads = key_padding_mask.contiguous();
    const bool* pad = pads.data<bool>();
    keep.resize(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) keep[n] = !pad[n];
  }
  const Tensor tokens = reshape(x, {N, C});                   // (N, C)
  const Tensor probs = softmax(gate_->forward(tokens), -1);  // (N, E)
  Routing routing = route_top_k(probs, k);

  // Token lists per expert; slot[n·k + j] = the row of token n's j-th output in the stacked outputs.
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(E));
  std::vector<int64_t> slot(static_cast<size_t>(N * k)), kept_gate(static_cast<size_t>(N * k));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = routing.choice[n * k + j];
      slot[n * k + j] = static_cast<int64_t>(rows[e].size());  // within expert e's rows for now
      rows[e].push_back(n);
      kept_gate[n * k + j] = n * E + e;  // p[n, e] as a row of p flattened to (N·E, 1)
    }
  std::vector<int64_t> offset(static_cast<size_t>(E), 0);
  std::vector<Tensor> outputs;
  for (int64_t e = 0, start = 0; e < E; ++e) {
    offset[e] = start;
    const int64_t n_e = static_cast<int64_t>(rows[e].size());
    if (n_e == 0) continue;  // an expert no token chose does not run (and gets no gradient this step)
    outputs.push_back((*experts_)[e].forward(embedding(tokens, ids(rows[e], {n_e}))));  // (n_e, C)
    start += n_e;
  }
  for (int64_t s = 0; s < N * k; ++s) slot[s] += offset[routing.choice[s]];

  Tensor y;
  if (N == 0) {
    y = tokens * 0.0;  // no token, no expert ran: an empty output still on the graph
  } else {
    const Tensor routed = outputs.size() == 1 ? outputs[0] : concat(outputs, 0);  // (N·k, C)
    const Tensor chosen = embedding(routed, ids(slot, {N, k}));                    // (N, k, C)
    const Tensor kept = embedding(reshape(probs, {N * E, 1}), ids(kept_gate, {N, k}));  // (N, k, 1)
    // (N, k, 1): the kept gates renormalised to sum 1; at k = 1 the raw gate, whose gradient p / p would lose
    const Tensor gates = k == 1 ? kept : kept / sum(kept, 1, true);
    y = sum(chosen * gates, 1);  // (N, C)
  }
  load_balancing_ = load_balancing_loss(probs, routing, keep);
  gate_probabilities_ = probs;
  routing_ = std::move(routing);
  return reshape(y, x.shape());
}

Tensor MixtureOfExperts::auxiliary_loss() const {
  if (!load_balancing_.defined()) return {};
  return load_balancing_ * options_.aux_loss_weight;
}

namespace {

/// The smallest gap, over the tokens of the last forward, between the k-th kept and the best dropped gate
/// probability (infinite when k = E: nothing is dropped).
double routing_margin(const MixtureOfExperts& moe) {
  const Tensor p = moe.gate_probabilities().detach().to(DType::float64).contiguous();
  const Routing& r = moe.routing();
  const int64_t E = p.size(1);
  double margin = std::numeric_limits<double>::infinity();
  for (int64_t n = 0; n < r.tokens; ++n) {
    const double* row = p.data<double>() + n * E;
    const int64_t* chosen = r.choice.data() + n * r.top_k;
    const double last_kept = row[chosen[r.top_k - 1]];
    for (int64_t e = 0; e < E; ++e)
      if (std::find(chosen, chosen + r.top_k, e) == chosen + r.top_k) margin = std::min(margin, last_kept - row[e]);
  }
  return margin;
}

// Over x and every named parameter, through the output and the load-balancing loss (concatenated, so one
// check covers both paths into the gate). The top-k choice is a step function of the gate logits: a finite
// difference across a tie would compare two different routings. So the run refuses inputs where a token's
// k-th kept and best dropped gate probabilities are within 0.01 of each other: far more than a
// central-difference step (1e-6 in float64, 1e-3 in float32) moves them; the seeds below pass.
GradcheckCase moe_case(const std::string& name, int64_t experts, int64_t top_k, const std::string& activation,
                       uint64_t seed) {
  return module_case<MixtureOfExperts>(
      "nn/moe/" + name,
      [=](Generator& gen) {
        return std::make_unique<MixtureOfExperts>(
            MixtureOfExpertsOptions{FeedForwardOptions{4, 6, activation, 0.0}, experts, top_k, 1.0}, gen, nullptr);
      },
      {{"x", {2, 4, 4}}},
      [](const MixtureOfExperts& moe, const std::vector<Tensor>& in) {
        const Tensor pads = mask({0, 0, 0, 1, 0, 0, 0, 0}, {2, 4});  // a pad: left out of the balancing
        const Tensor y = moe.forward_masked(in[0], pads);
        if (routing_margin(moe) < 0.01)
          throw ValueError(cat("moe gradcheck: gate probabilities within ", routing_margin(moe),
                               " of a tie; choose another seed"));
        return concat({reshape(y, {y.numel()}), reshape(moe.auxiliary_loss(), {1})}, 0);
      },
      seed);
}

// One initialiser runs every registration of this file when the library loads.
const bool registered = [] {
  register_component<FeedForwardKind>(
      {.name = "moe",
       .help = "mixture of experts dense blocks (width d_ff); a softmax gate sends each token to its top_k best, "
               "weighted by the renormalised gates; load-balancing loss weighted by aux_weight",
       .make = [](const EncoderLayerOptions& o, Generator& init,
                  std::shared_ptr<Generator> dropout_rng) -> std::unique_ptr<FeedForwardBlock> {
         const VariantSettings settings = settings_of<FeedForwardKind>(o.settings, "moe");
         return std::make_unique<MixtureOfExperts>(
             MixtureOfExpertsOptions{FeedForwardOptions{o.d_model, o.d_ff, o.activation, o.dropout},
                                     settings.integer("experts"), settings.integer("top_k"),
                                     settings.real("aux_weight")},
             init, std::move(dropout_rng));
       },
       // E dense blocks (2CF + F + C each) and the gate (C·E + E)
       .parameter_count = [](const EncoderLayerOptions& o) {
         const int64_t E = settings_of<FeedForwardKind>(o.settings, "moe").integer("experts");
         return E * (2 * o.d_model * o.d_ff + o.d_ff + o.d_model) + o.d_model * E + E;
       },
       .auxiliary_loss = true,
       .settings = {
           // 1024 experts is far beyond any model trained here, and keeps E·(2CF + F + C) within int64.
           {.name = "experts", .type = SettingType::integer, .default_value = int64_t{4}, .min = 1, .max = 1024,
            .help = "experts per layer", .old_key = "experts"},
           {.name = "top_k", .type = SettingType::integer, .default_value = int64_t{2}, .min = 1,
            .max_setting = "experts", .help = "experts each token goes through", .old_key = "top_k"},
           // Training-only: it weighs a loss, and changes neither a weight nor what the model computes.
           // At most 100: beyond it the balancing loss outweighs the task's (of order 1) so far that the task
           // no longer trains.
           {.name = "aux_weight", .type = SettingType::real, .default_value = 0.01, .min = 0, .max = 100,
            .help = "weight of the load-balancing loss", .flag = "--moe-aux-weight", .changes_model = false,
            .old_key = "moe_aux_weight"},
       }});
  // Seeds chosen so that (besides the routing margin the run checks) every relu pre-activation is at least
  // 0.008 from the kink.
  register_gradchecks({moe_case("top2-of-4-relu", 4, 2, "relu", 4), moe_case("top1-of-3-gelu", 3, 1, "gelu", 617),
                       moe_case("top3-of-3-relu", 3, 3, "relu", 617)});
  return true;
}();

}  // namespace

}  // namespace tapegrad::nn
