// Two options of every encoder layer's self-attention: causal (GPT-style; each position sees earlier ones
// only) and the softmax temperature τ, softmax(q kᵀ / (√D · τ)).
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "autograd/autograd.h"
#include "nn/attention.h"
#include "nn/classifier.h"
#include "nn/encoder.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {

SequenceClassifier micro_model(bool causal, double temperature = 1.0, uint64_t seed = 9) {
  ClassifierOptions o = micro_classifier();
  o.settings.set("attention", "causal", causal);
  o.settings.set("attention", "temperature", temperature);
  Generator init(seed);
  return SequenceClassifier(o, init, nullptr);
}

}  // namespace

TEST_CASE("nn: with causal attention, position t of the encoder output ignores later tokens") {
  const Tensor a = ids({3, 1, 4, 1, 5, 2}, {1, 6}), b = ids({3, 1, 4, 6, 2, 6}, {1, 6});  // differ from t = 3 on
  for (const bool causal : {true, false}) {
    const SequenceClassifier model = micro_model(causal);
    const Tensor ea = model.encode(a), eb = model.encode(b);  // (1, 6, C)
    const double before = max_abs_diff(slice(ea, 1, 0, 3), slice(eb, 1, 0, 3));
    const double after = max_abs_diff(slice(ea, 1, 3, 6), slice(eb, 1, 3, 6));
    INFO("causal " << causal);
    CHECK(after > 1e-4);
    if (causal)
      CHECK(before == 0);  // bit for bit: the hidden keys get weight exactly 0
    else
      CHECK(before > 1e-4);
  }
}

TEST_CASE("nn: the causal option combines with a given bool or float mask") {
  Generator gen(4);
  EncoderLayerOptions o{4, 2, 6, 0.0};
  o.settings.set("attention", "causal", true);
  const TransformerEncoderLayer causal(o, gen, nullptr);
  const Tensor x = randn({2, 4, 4}, gen);
  const Tensor plain = causal.forward(x);
  // Hiding key 0 from query 3 (a key causal leaves visible) must change query 3 only.
  const Tensor extra = mask({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}, {4, 4});
  const Tensor with_bool = causal.forward(x, extra);
  CHECK(max_abs_diff(slice(with_bool, 1, 0, 3), slice(plain, 1, 0, 3)) == 0);
  CHECK(max_abs_diff(slice(with_bool, 1, 3, 4), slice(plain, 1, 3, 4)) > 1e-4);
  // A zero float mask adds nothing; causal still hides the later keys.
  CHECK(max_abs_diff(causal.forward(x, zeros({4, 4})), plain) < 1e-6);
}

TEST_CASE("nn: a large temperature makes the attention weights uniform, and τ = 1 changes nothing") {
  Generator gen(6);
  const Tensor x = randn({2, 5, 8}, gen);
  const auto weights = [&](double temperature) {
    Generator init(1);
    const MultiHeadAttention mha({8, 2, true, 0.0, temperature}, init, nullptr);
    NoGradGuard no_grad;
    return mha.forward(x, x, x, {}, {}, true);
  };
  const AttentionResult standard = weights(1.0), hot = weights(1e6);
  for (double w : hot.weights.to_vector()) CHECK(w == Approx(1.0 / 5).margin(1e-5));
  double spread = 0;  // the standard weights are not uniform to begin with
  for (double w : standard.weights.to_vector()) spread = std::max(spread, std::fabs(w - 0.2));
  CHECK(spread > 0.01);
  // τ = 1 is the standard attention to the bit, weights and output.
  Generator init(1);
  const MultiHeadAttention plain({8, 2}, init, nullptr);
  NoGradGuard no_grad;
  const AttentionResult reference = plain.forward(x, x, x, {}, {}, true);
  CHECK(max_abs_diff(standard.output, reference.output) == 0);
  CHECK(max_abs_diff(standard.weights, reference.weights) == 0);
  // τ scales the scores: τ = 2 equals the standard attention with the q projection halved.
  Generator init2(1);
  MultiHeadAttention halved({8, 2}, init2, nullptr);
  float* w = halved.in_proj_weight.data<float>();  // rows [0, 8) project the queries (in_proj_bias is 0)
  for (int i = 0; i < 8 * 8; ++i) w[i] /= 2;
  CHECK(max_abs_diff(weights(2.0).weights, halved.forward(x, x, x, {}, {}, true).weights) < 1e-6);
}

TEST_CASE("nn: temperature must be finite and positive") {
  ClassifierOptions o = micro_classifier();
  for (const double bad : {0.0, -1.0, double(INFINITY), double(NAN)}) {
    o.settings.set("attention", "temperature", bad);
    CHECK_THROWS_AS(validate(o), ValueError);
    Generator gen(0);
    CHECK_THROWS_AS(MultiHeadAttention({4, 2, true, 0.0, bad}, gen, nullptr), ValueError);
  }
}
