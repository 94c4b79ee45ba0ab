// ALiBi (nn/alibi.h, seed 003 §4.5): the slopes of the paper, the bias, the component in attention and in a
// classifier, and its gradient check.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/alibi.h"
#include "nn/attention.h"
#include "nn/classifier.h"

using namespace tapegrad;
using namespace tapegrad::nn;

TEST_CASE("nn: ALiBi slopes are 2^(-8h/H), interpolated for H not a power of two") {
  const std::vector<double> eight = alibi_slopes(8);
  REQUIRE(eight.size() == 8);
  for (int h = 1; h <= 8; ++h) CHECK(eight[h - 1] == std::ldexp(1.0, -h));  // 1/2, 1/4, ..., 1/256, exactly
  const std::vector<double> two = alibi_slopes(2);
  CHECK(two == std::vector<double>{std::ldexp(1.0, -4), std::ldexp(1.0, -8)});
  // H = 6: the 4 slopes of H = 4 (2^-2, 2^-4, 2^-6, 2^-8), then slopes 1 and 3 of H = 8 (2^-1, 2^-3).
  const std::vector<double> six = alibi_slopes(6);
  const std::vector<double> expected{std::ldexp(1.0, -2), std::ldexp(1.0, -4), std::ldexp(1.0, -6),
                                     std::ldexp(1.0, -8), std::ldexp(1.0, -1), std::ldexp(1.0, -3)};
  CHECK(six == expected);
  CHECK(alibi_slopes(1) == std::vector<double>{std::ldexp(1.0, -8)});
  CHECK_THROWS_AS(alibi_slopes(0), ValueError);
}

TEST_CASE("nn: the ALiBi bias is -slope_h · |i - j|") {
  const AlibiPositionalEncoding alibi(10);
  const Tensor bias = alibi.attention_bias(4, 3, 5, DType::float64);
  REQUIRE(bias.shape() == Shape{4, 3, 5});
  const std::vector<double> slopes = alibi_slopes(4);
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 5; ++j) CHECK(bias.at({h, i, j}) == -slopes[h] * std::abs(i - j));
  CHECK_FALSE(alibi.forward(6, DType::float32).defined());
  CHECK_THROWS_AS(alibi.attention_bias(4, 11, 11, DType::float32), ShapeError);
}

TEST_CASE("nn: attention with ALiBi equals attention with the bias as a float mask, combined with a bool mask") {
  Generator gen(11);
  const int64_t B = 2, T = 5, H = 4;
  const MultiHeadAttention mha({8, H}, gen, nullptr);
  const Tensor x = randn({B, T, 8}, gen, DType::float32);
  const AlibiPositionalEncoding alibi(16);
  const Tensor bias = alibi.attention_bias(H, T, T, DType::float32);  // (H, T, T)
  // PyTorch's per-head float mask (B·H, T, T): the same bias for every batch.
  const Tensor per_head = reshape(expand(unsqueeze(bias, 0), Shape{B, H, T, T}).contiguous(), {B * H, T, T});
  CHECK(max_abs_diff(mha.attend(x, {}, {}, false, &alibi).output, mha.forward(x, x, x, per_head).output) < 1e-6);
  // A bool causal mask with the bias: -inf above the diagonal, the bias elsewhere.
  const Tensor causal_float = masked_fill(zeros({T, T}), causal_mask(T), -INFINITY);
  const Tensor both = per_head + causal_float;
  const AttentionResult hooked = mha.attend(x, causal_mask(T), {}, true, &alibi);
  CHECK(max_abs_diff(hooked.output, mha.forward(x, x, x, both).output) < 1e-6);
  CHECK(hooked.weights.at({0, 1, 1, 2}) == 0);  // a later key stays hidden
  CHECK(max_abs_diff(hooked.output, mha.attend(x, causal_mask(T), {}, false).output) > 1e-3);
}

TEST_CASE("nn: the alibi component has no parameters, and its gradient check passes in float64") {
  ClassifierOptions o = micro_classifier();
  o.positional = "alibi";
  Generator init(2);
  const SequenceClassifier model(o, init, nullptr);
  CHECK(parameter_count(o) == model.parameter_count());
  for (const auto& [name, p] : model.named_parameters()) CHECK(name.rfind("pos_embed", 0) != 0);
  // The bias sees distances |i - j| only: swapping two tokens changes them, but reversing the sequence does
  // not, so with mean pooling a sequence and its reverse get the same logits (the "order" task needs a
  // causal mask or cls pooling to break that symmetry).
  const Tensor logits = model.forward(ids({1, 2, 3, 5}, {1, 4}));
  CHECK(max_abs_diff(logits, model.forward(ids({2, 1, 3, 5}, {1, 4}))) > 1e-5);
  CHECK(max_abs_diff(logits, model.forward(ids({5, 3, 2, 1}, {1, 4}))) < 1e-6);
  o.settings.set("attention", "causal", true);
  Generator init_causal(2);
  const SequenceClassifier causal(o, init_causal, nullptr);
  CHECK(max_abs_diff(causal.forward(ids({1, 2, 3, 5}, {1, 4})), causal.forward(ids({5, 3, 2, 1}, {1, 4}))) > 1e-5);

  for (const GradcheckCase& c : gradcheck_cases())
    if (c.name == "nn/alibi/self-attention") {
      const GradcheckResult result = c.run(GradcheckOptions::float64());
      INFO(result.str());
      CHECK(result.passed);
      CHECK(result.max_abs_error() < 1e-7);
      return;
    }
  FAIL("no gradcheck case nn/alibi/self-attention");
}
