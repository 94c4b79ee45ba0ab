// The mixture-of-experts block (nn/moe.h): its gradient checks, top-k routing and renormalisation against a
// dense reference, the reduction to one expert, the load-balancing loss against its formula by hand, the
// padding left out of it, the parameter count, the option checks, and the classifier's auxiliary loss.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/classifier.h"
#include "nn/component_checks.h"
#include "nn/moe.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {
MixtureOfExpertsOptions small_moe(int64_t experts, int64_t top_k, double aux_weight = 0.01) {
  return {FeedForwardOptions{4, 6, "relu", 0.0}, experts, top_k, aux_weight};
}
}  // namespace

TEST_CASE("moe: gradient checks over x and every parameter pass in float64") {
  int checked = 0;
  for (const GradcheckCase& c : gradcheck_cases()) {
    if (c.name.rfind("nn/moe/", 0) != 0) continue;
    ++checked;
    const GradcheckResult result = c.run(GradcheckOptions::float64());
    INFO(c.name << "\n" << result.str());
    CHECK(result.passed);
    // x, gate.weight, gate.bias and four per expert
    CHECK(result.inputs.size() >= 3 + 4 * 3);
  }
  CHECK(checked == 3);
}

TEST_CASE("moe: parameter names, shapes and count") {
  Generator gen(1);
  const MixtureOfExperts moe(small_moe(3, 2), gen, nullptr);
  const NamedTensors params = moe.named_parameters();
  REQUIRE(params.size() == 2 + 3 * 4);
  CHECK(params[0].first == "gate.weight");
  CHECK(params[0].second.shape() == Shape{3, 4});
  CHECK(params[1].first == "gate.bias");
  CHECK(params[2].first == "experts.0.linear1.weight");
  CHECK(params[2].second.shape() == Shape{6, 4});
  CHECK(params[13].first == "experts.2.linear2.bias");
  // 3 experts of 2·4·6 + 6 + 4 = 58, and the gate 4·3 + 3
  CHECK(moe.parameter_count() == 3 * 58 + 15);
  EncoderLayerOptions layer{4, 2, 6};
  layer.ffn = "moe";
  layer.settings.set("ffn", "experts", int64_t{3});
  CHECK(component<FeedForwardKind>("moe").parameter_count(layer) == 3 * 58 + 15);
  std::string problems;
  // Only moe's: test_components registers a deliberately broken norm that the whole run also sees.
  for (const std::string& problem : component_problems())
    if (problem.rfind("ffn 'moe'", 0) == 0) problems += problem + "\n";
  CHECK(problems == "");
}

TEST_CASE("moe: each token keeps exactly its k largest gates, renormalised, and sums those experts") {
  Generator gen(2);
  MixtureOfExperts moe(small_moe(5, 2), gen, nullptr);
  const Tensor x = randn({3, 7, 4}, gen, DType::float64);
  moe.to(DType::float64);
  const Tensor y = moe.forward(x);
  REQUIRE(y.shape() == Shape{3, 7, 4});
  const std::vector<double> p = moe.gate_probabilities().to_vector();
  const Routing& routing = moe.routing();
  REQUIRE(routing.tokens == 21);
  // The dense gate matrix G (N, E): the kept gates renormalised, zero elsewhere.
  std::vector<double> G(21 * 5, 0.0);
  for (int64_t n = 0; n < 21; ++n) {
    const std::set<int64_t> chosen(routing.choice.begin() + 2 * n, routing.choice.begin() + 2 * n + 2);
    REQUIRE(chosen.size() == 2);
    const double smallest_kept = std::min(p[n * 5 + routing.choice[2 * n]], p[n * 5 + routing.choice[2 * n + 1]]);
    double kept_sum = 0;
    for (int64_t e : chosen) kept_sum += p[n * 5 + e];
    for (int64_t e = 0; e < 5; ++e) {
      if (!chosen.count(e)) {
        CHECK(p[n * 5 + e] <= smallest_kept);  // nothing dropped beats what was kept
        continue;
      }
      G[n * 5 + e] = p[n * 5 + e] / kept_sum;
    }
    double g_sum = 0;
    int nonzero = 0;
    for (int64_t e = 0; e < 5; ++e) {
      g_sum += G[n * 5 + e];
      nonzero += G[n * 5 + e] != 0;
    }
    CHECK(g_sum == Approx(1.0).epsilon(1e-12));
    CHECK(nonzero == 2);
  }
  // The dense reference: every expert on every token, weighted by G.
  const Tensor tokens = reshape(x, {21, 4});
  std::vector<double> expected(21 * 4, 0.0);
  for (int64_t e = 0; e < 5; ++e) {
    const std::vector<double> out = moe.experts()[e].forward(tokens).to_vector();
    for (int64_t n = 0; n < 21; ++n)
      for (int64_t c = 0; c < 4; ++c) expected[n * 4 + c] += G[n * 5 + e] * out[n * 4 + c];
  }
  CHECK(max_abs_diff(y, tensor(expected, {3, 7, 4}, DType::float64)) < 1e-12);
}

TEST_CASE("moe: route_top_k orders by probability and breaks ties to the lower expert") {
  const Routing r = route_top_k(tensor({0.1, 0.4, 0.1, 0.4, 0.25, 0.25, 0.25, 0.25}, {2, 4}), 3);
  CHECK(r.choice == std::vector<int64_t>{1, 3, 0, 0, 1, 2});
  CHECK_THROWS_AS(route_top_k(tensor({0.5, 0.5}, {1, 2}), 3), ValueError);
}

TEST_CASE("moe: with top_k == experts and identical experts the block is that one expert") {
  Generator gen(3);
  const MixtureOfExperts moe(small_moe(3, 3), gen, nullptr);
  {
    NoGradGuard no_grad;
    const FeedForward& first = moe.experts()[0];
    for (size_t e = 1; e < 3; ++e) {
      const FeedForward& other = moe.experts()[e];
      other.linear1().weight.copy_(first.linear1().weight);
      other.linear1().bias.copy_(first.linear1().bias);
      other.linear2().weight.copy_(first.linear2().weight);
      other.linear2().bias.copy_(first.linear2().bias);
    }
  }
  const Tensor x = randn({2, 5, 4}, gen);
  // the gates sum to 1 over all experts, so Σ_e g_e · f(x) = f(x) up to rounding
  CHECK(max_abs_diff(moe.forward(x), moe.experts()[0].forward(x)) < 1e-5);
}

TEST_CASE("moe: the load-balancing loss is E · Σ f_e · P_e, on a hand-built case, and leaves pads out") {
  // N = 4 tokens, E = 3, k = 1.
  const Tensor p = tensor({0.7, 0.2, 0.1,  //
                           0.1, 0.6, 0.3,  //
                           0.5, 0.3, 0.2,  //
                           0.2, 0.2, 0.6},
                          {4, 3}, DType::float64)
                       .requires_grad_();
  const Routing top1 = route_top_k(p, 1);
  CHECK(top1.choice == std::vector<int64_t>{0, 1, 0, 2});
  // f = (2, 1, 1)/4; P = (1.5, 1.3, 1.2)/4; aux = 3 · (3 + 1.3 + 1.2)/16 = 16.5/16
  const Tensor aux = load_balancing_loss(p, top1);
  CHECK(aux.item() == Approx(16.5 / 16).epsilon(1e-14));
  // d aux / d p[n, e] = E · f_e / N = 3 f_e / 4 at every token
  aux.backward();
  const std::vector<double> dp = p.grad().to_vector();
  for (int n = 0; n < 4; ++n) {
    CHECK(dp[n * 3 + 0] == Approx(3 * 0.5 / 4));
    CHECK(dp[n * 3 + 1] == Approx(3 * 0.25 / 4));
    CHECK(dp[n * 3 + 2] == Approx(3 * 0.25 / 4));
  }
  // Token 3 is a pad: f = (2, 1, 0)/3, P = (1.3, 1.1, 0.6)/3; aux = 3 · (2.6 + 1.1)/9 = 11.1/9
  CHECK(load_balancing_loss(p, top1, {true, true, true, false}).item() == Approx(11.1 / 9).epsilon(1e-14));
  // k = 2: token choices {0,1}, {1,2}, {0,1}, {2,0|1}: f counts the 8 slots
  const Routing top2 = route_top_k(p, 2);
  CHECK(top2.choice == std::vector<int64_t>{0, 1, 1, 2, 0, 1, 2, 0});
  // f = (3, 3, 2)/8; aux = 3 · (3·1.5 + 3·1.3 + 2·1.2)/(8·4) = 3 · 10.8/32
  CHECK(load_balancing_loss(p, top2).item() == Approx(3 * 10.8 / 32).epsilon(1e-14));
  // Uniform routing gives 1, the minimum the weight pushes towards.
  const Tensor uniform = full({4, 2}, 0.5, DType::float64);
  CHECK(load_balancing_loss(uniform, Routing{4, 1, {0, 1, 0, 1}}).item() == Approx(1.0));
  // Every token a pad: a zero still on the graph.
  CHECK(load_balancing_loss(p, top1, {false, false, false, false}).item() == 0);
}

TEST_CASE("moe: padding is left out of the routing statistics, not of the output") {
  Generator gen(4);
  const MixtureOfExperts moe(small_moe(4, 2, 0.5), gen, nullptr);
  const Tensor x = randn({2, 3, 4}, gen);
  const Tensor pads = mask({0, 0, 1, 0, 1, 1}, {2, 3});
  const Tensor y_all = moe.forward(x);
  const Tensor y = moe.forward_masked(x, pads);
  CHECK(max_abs_diff(y, y_all) == 0);
  const Tensor aux_masked = moe.load_balancing();
  // the same loss as over the three real tokens (0, 1 and 3) alone
  const Tensor rows = reshape(x, {6, 4});
  moe.forward(reshape(concat({slice(rows, 0, 0, 2), slice(rows, 0, 3, 4)}, 0), {1, 3, 4}));
  CHECK(aux_masked.item() == Approx(moe.load_balancing().item()).epsilon(1e-6));
  CHECK(moe.auxiliary_loss().item() == Approx(0.5 * moe.load_balancing().item()));
  CHECK_THROWS_AS(moe.forward_masked(x, mask({0, 0, 0}, {1, 3})), ShapeError);
}

TEST_CASE("moe: options out of range are refused by name") {
  Generator gen(5);
  CHECK_THROWS_WITH(MixtureOfExperts(small_moe(3, 4), gen, nullptr), Catch::Contains("top_k = 4"));
  CHECK_THROWS_WITH(MixtureOfExperts(small_moe(3, 0), gen, nullptr), Catch::Contains("top_k = 0"));
  CHECK_THROWS_WITH(MixtureOfExperts(small_moe(0, 1), gen, nullptr), Catch::Contains("experts"));
  ClassifierOptions o = micro_classifier();
  o.ffn = "moe";
  o.settings.set("ffn", "top_k", int64_t{5});
  CHECK_THROWS_WITH(validate(o), Catch::Contains("ffn.top_k = 5 is outside [1, ffn.experts = 4]"));
  o.settings.set("ffn", "top_k", int64_t{2});
  o.settings.set("ffn", "aux_weight", -1.0);
  CHECK_THROWS_WITH(validate(o), Catch::Contains("ffn.aux_weight must be a finite number in [0, 100], got -1"));
  o.settings.set("ffn", "aux_weight", 0.01);
  o.settings.set("ffn", "experts", int64_t{0});
  CHECK_THROWS_WITH(validate(o), Catch::Contains("ffn.experts = 0 is outside [1, 1024]"));
  // A setting of a variant not chosen, and one of the wrong type, are refused by name too.
  ClassifierOptions dense = micro_classifier();
  dense.settings.set("ffn", "top_k", int64_t{1});
  CHECK_THROWS_WITH(validate(dense), Catch::Contains("ffn.top_k applies to ffn = moe only, not ffn = dense"));
  o.settings.set("ffn", "experts", 4.0);
  CHECK_THROWS_WITH(validate(o), Catch::Contains("ffn.experts = 4 must be of type integer"));
}

TEST_CASE("moe: the classifier sums its layers' weighted auxiliary losses, and a dense one has none") {
  ClassifierOptions o = micro_classifier();
  Generator gen(6);
  const SequenceClassifier dense(o, gen, nullptr);
  dense.forward(ids({1, 2, 3, 0}, {1, 4}));
  CHECK_FALSE(dense.auxiliary_loss().defined());

  o.ffn = "moe";
  o.settings.set("ffn", "experts", int64_t{3});
  o.settings.set("ffn", "top_k", int64_t{1});
  o.settings.set("ffn", "aux_weight", 0.25);
  const SequenceClassifier moe(o, gen, nullptr);
  CHECK_FALSE(moe.auxiliary_loss().defined());  // before any forward
  const Tensor logits = moe.forward(ids({1, 2, 3, 0, 4, 5, 0, 0}, {2, 4}), mask({0, 0, 0, 1, 0, 0, 1, 1}, {2, 4}));
  const Tensor aux = moe.auxiliary_loss();
  REQUIRE(aux.defined());
  double expected = 0;
  for (size_t i = 0; i < moe.encoder().n_layers(); ++i) {
    const auto& block = dynamic_cast<const MixtureOfExperts&>(moe.encoder().layer(i).feed_forward());
    CHECK(block.routing().tokens == 8);
    expected += 0.25 * block.load_balancing().item();
  }
  CHECK(aux.item() == Approx(expected));
  // The gradient of task loss + aux reaches every gate.
  (sum(logits) * 0.0 + aux).backward();
  for (const auto& [name, param] : moe.named_parameters())
    if (name.find("gate.weight") != std::string::npos) CHECK(param.grad().defined());
}

TEST_CASE("moe: the task loss alone trains the gate for every k, top-1 through the raw gate probability") {
  for (int64_t k = 1; k <= 4; ++k) {
    INFO("top_k " << k);
    Generator gen(11);
    MixtureOfExperts moe(small_moe(4, k, /*aux_weight=*/0.0), gen, nullptr);
    moe.to(DType::float64);
    const Tensor x = randn({2, 5, 4}, gen, DType::float64);
    const Tensor target = randn({2, 5, 4}, gen, DType::float64);
    const Tensor diff = moe.forward(x) - target;
    backward(sum(diff * diff));  // a task loss; no load-balancing term
    const Tensor& dW = moe.named_parameters()[0].second.grad();  // gate.weight
    REQUIRE(moe.named_parameters()[0].first == "gate.weight");
    REQUIRE(dW.defined());
    double norm = 0;
    for (double g : dW.to_vector()) norm += g * g;
    // k = E keeps every gate renormalised to sum 1, y = Σ p_e expert_e: the gate still gets a gradient; at
    // k = 1 a renormalised gate would be p / p = 1 and this would be 0.
    CHECK(std::sqrt(norm) > 1e-3);
  }
  // Top-1 weighs the chosen expert by its raw probability: y = p[n, e*] · expert_e*(x[n]).
  Generator gen(3);
  MixtureOfExperts moe(small_moe(3, 1), gen, nullptr);
  moe.to(DType::float64);
  const Tensor x = randn({1, 4, 4}, gen, DType::float64);
  const std::vector<double> y = moe.forward(x).to_vector();
  const std::vector<double> p = moe.gate_probabilities().to_vector();
  const Tensor tokens = reshape(x, {4, 4});
  for (int64_t n = 0; n < 4; ++n) {
    const int64_t e = moe.routing().choice[n];
    const std::vector<double> out = moe.experts()[e].forward(tokens).to_vector();
    for (int64_t c = 0; c < 4; ++c) CHECK(y[n * 4 + c] == Approx(p[n * 3 + e] * out[n * 4 + c]).epsilon(1e-12));
  }
}
