// The walkthrough of seed 002 §3.3–3.6 and seed 000's exercises 3.1–3.3 (examples/attention_walkthrough.cpp):
// the seed's printed numbers for deterministic inputs, and every identity the walkthrough shows between the
// seed's modules (examples/seed_attention.h), plus float64 gradient checks of those modules over the input
// and every named parameter. Printed values have 4 decimals, so a match is |ours - printed| <= 5e-5 plus
// float32 rounding.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../../examples/seed_attention.h"
#include "autograd/autograd.h"
#include "nn/attention.h"
#include "nn/dropout.h"

using namespace tapegrad;

namespace {

constexpr double kPrinted = 5e-5 + 1e-6;
constexpr double kInf = INFINITY;

/// The six 3-d embeddings of "Your journey starts with one step", one row per token.
Tensor journey_inputs() {
  return tensor({0.43, 0.15, 0.89,   // Your     (x^1)
                 0.55, 0.87, 0.66,   // journey  (x^2)
                 0.57, 0.85, 0.64,   // starts   (x^3)
                 0.22, 0.58, 0.33,   // with     (x^4)
                 0.77, 0.25, 0.10,   // one      (x^5)
                 0.05, 0.80, 0.55},  // step     (x^6)
                {6, 3});
}

/// torch.stack((x, x), dim=0).   x: (T, C) -> (2, T, C)
Tensor stack_twice(const Tensor& x) { return concat({unsqueeze(x, 0), unsqueeze(x, 0)}, 0); }

/// Largest |a - printed| over all elements.
double off_by(const Tensor& a, const std::vector<double>& printed) {
  const std::vector<double> values = a.to_vector();
  REQUIRE(values.size() == printed.size());
  double worst = 0;
  for (size_t i = 0; i < values.size(); ++i) worst = std::max(worst, std::fabs(values[i] - printed[i]));
  return worst;
}

std::vector<std::string> parameter_names(const nn::Module& m) {
  std::vector<std::string> names;
  for (const auto& [name, _] : m.named_parameters()) names.push_back(name);
  return names;
}

Tensor identity(int64_t n) {
  std::vector<double> values(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i * n + i)] = 1.0;
  return tensor(values, {n, n});
}

/// Float64 gradcheck of m.forward over a fresh (B, T, d_in) input and every named parameter of m, which
/// is converted to float64 first. The report names each parameter.
template <class M>
GradcheckResult gradcheck_module(M& m, const Shape& x_shape, uint64_t seed) {
  m.to(DType::float64);
  Generator gen(seed);
  std::vector<Tensor> inputs{randn(x_shape, gen, DType::float64).requires_grad_()};
  std::vector<std::string> names{"x"};
  for (const auto& [name, param] : m.named_parameters()) {
    inputs.push_back(param);
    names.push_back(name);
  }
  const TensorFn fn = [&m](const std::vector<Tensor>& in) { return m.forward(in[0]); };
  return gradcheck(fn, inputs, GradcheckOptions::float64(), names);
}

}  // namespace

// ---- §3.3: the numbers of attention without trainable weights ----

TEST_CASE("walkthrough: scores, weights and context vector of the query x^2 match the seed") {
  const Tensor inputs = journey_inputs();
  const Tensor query = select(inputs, 0, 1);
  const Tensor scores_2 = matmul(inputs, query);
  CHECK(off_by(scores_2, {0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865}) <= kPrinted);
  CHECK(off_by(matmul(select(inputs, 0, 0), query), {0.9544}) <= kPrinted);
  CHECK(off_by(scores_2 / sum(scores_2), {0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656}) <= kPrinted);
  const Tensor naive = exp(scores_2) / sum(exp(scores_2));
  const Tensor weights_2 = softmax(scores_2, 0);
  CHECK(off_by(naive, {0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581}) <= kPrinted);
  CHECK(off_by(weights_2, {0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581}) <= kPrinted);
  CHECK(sum(weights_2).item() == Approx(1.0).margin(1e-6));
  CHECK(off_by(matmul(weights_2, inputs), {0.4419, 0.6515, 0.5683}) <= kPrinted);
}

TEST_CASE("walkthrough: all scores, weights and context vectors match the seed") {
  const Tensor inputs = journey_inputs();
  const Tensor scores = matmul(inputs, transpose(inputs, 0, 1));
  CHECK(off_by(scores, {0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310,  //
                        0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865,  //
                        0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605,  //
                        0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565,  //
                        0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935,  //
                        0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450}) <= kPrinted);
  const Tensor weights = softmax(scores, -1);
  CHECK(off_by(weights, {0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452,  //
                         0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581,  //
                         0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565,  //
                         0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720,  //
                         0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295,  //
                         0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896}) <= kPrinted);
  CHECK(off_by(sum(weights, -1), {1, 1, 1, 1, 1, 1}) <= 1e-6);
  const Tensor context = matmul(weights, inputs);
  CHECK(off_by(context, {0.4421, 0.5931, 0.5790,  //
                         0.4419, 0.6515, 0.5683,  //
                         0.4431, 0.6496, 0.5671,  //
                         0.4304, 0.6298, 0.5510,  //
                         0.4671, 0.5910, 0.5266,  //
                         0.4177, 0.6503, 0.5645}) <= kPrinted);
}

TEST_CASE("walkthrough: the 4-D batched product a @ a.transpose(2, 3) matches the seed and each head's product") {
  const Tensor a =
      tensor({0.2745, 0.6584, 0.2775, 0.8573, 0.8993, 0.0390, 0.9268, 0.7388, 0.7179, 0.7058, 0.9156, 0.4340,
              0.0772, 0.3565, 0.1479, 0.5331, 0.4066, 0.2318, 0.4545, 0.9737, 0.4606, 0.5159, 0.4220, 0.5786},
             {1, 2, 3, 4});
  const Tensor product = matmul(a, transpose(a, 2, 3));
  REQUIRE(product.shape() == Shape({1, 2, 3, 3}));
  const std::vector<double> first = {1.3208, 1.1631, 1.2879, 1.1631, 2.2150, 1.8424, 1.2879, 1.8424, 2.0402};
  const std::vector<double> second = {0.4391, 0.7003, 0.5903, 0.7003, 1.3737, 1.0620, 0.5903, 1.0620, 0.9912};
  std::vector<double> both = first;
  both.insert(both.end(), second.begin(), second.end());
  CHECK(off_by(product, both) <= kPrinted);
  for (int64_t h = 0; h < 2; ++h) {
    const Tensor head = select(select(a, 0, 0), 0, h);  // a[0, h, :, :]
    const Tensor own = matmul(head, transpose(head, 0, 1));
    CHECK(off_by(own, h == 0 ? first : second) <= kPrinted);
    CHECK(max_abs_diff(own, select(select(product, 0, 0), 0, h)) <= 1e-6);
  }
}

// ---- §3.4: trainable weights ----

TEST_CASE("walkthrough: SelfAttentionV1 row 2 is the step-by-step context vector of x^2 from the same draws") {
  const Tensor inputs = journey_inputs();
  Generator gen(123);
  const Tensor W_query = rand({3, 2}, gen), W_key = rand({3, 2}, gen), W_value = rand({3, 2}, gen);
  const Tensor query_2 = matmul(select(inputs, 0, 1), W_query);
  const Tensor keys = matmul(inputs, W_key), values = matmul(inputs, W_value);
  CHECK(keys.shape() == Shape({6, 2}));
  CHECK(values.shape() == Shape({6, 2}));
  const Tensor attn_scores_2 = matmul(query_2, transpose(keys, 0, 1));
  CHECK(matmul(query_2, select(keys, 0, 1)).item() == Approx(attn_scores_2.at({1})).margin(1e-6));
  const Tensor context_vec_2 = matmul(softmax(attn_scores_2 / std::sqrt(2.0), -1), values);

  Generator gen_v1(123);
  const seed::SelfAttentionV1 sa_v1(3, 2, gen_v1);
  CHECK(parameter_names(sa_v1) == std::vector<std::string>{"W_query", "W_key", "W_value"});
  const Tensor out = sa_v1.forward(inputs);
  REQUIRE(out.shape() == Shape({6, 2}));
  CHECK(max_abs_diff(select(out, 0, 1), context_vec_2) <= 1e-6);
}

TEST_CASE("walkthrough: SelfAttentionV1 with SelfAttentionV2's transposed weights equals V2 (exercise 3.1)") {
  Generator gen_v1(123), gen_v2(123);
  seed::SelfAttentionV1 sa_v1(3, 2, gen_v1);
  const seed::SelfAttentionV2 sa_v2(3, 2, /*qkv_bias=*/false, gen_v2);
  CHECK(parameter_names(sa_v2) == std::vector<std::string>{"W_query.weight", "W_key.weight", "W_value.weight"});
  const Tensor inputs = journey_inputs();
  CHECK(max_abs_diff(sa_v1.forward(inputs), sa_v2.forward(inputs)) > 1e-3);  // different weights before
  sa_v1.load_state_dict({{"W_query", transpose(sa_v2.W_query().weight, 0, 1)},
                         {"W_key", transpose(sa_v2.W_key().weight, 0, 1)},
                         {"W_value", transpose(sa_v2.W_value().weight, 0, 1)}});
  CHECK(max_abs_diff(sa_v1.forward(inputs), sa_v2.forward(inputs)) <= 1e-6);
  const Tensor batch = stack_twice(inputs);  // both accept a batch too
  CHECK(max_abs_diff(sa_v1.forward(batch), sa_v2.forward(batch)) <= 1e-6);
}

// ---- §3.5: causal masks and dropout ----

TEST_CASE("walkthrough: renormalising tril-masked weights equals -inf masking before softmax") {
  const Tensor inputs = journey_inputs();
  Generator gen(789);
  const seed::SelfAttentionV2 sa_v2(3, 2, false, gen);
  const Tensor scores = matmul(sa_v2.W_query().forward(inputs), transpose(sa_v2.W_key().forward(inputs), 0, 1));
  const double scale = std::sqrt(2.0);
  const Tensor weights = softmax(scores / scale, -1);

  const Tensor future = nn::causal_mask(6);  // torch.triu(ones(6, 6), diagonal=1).bool()
  const Tensor tril = masked_fill(ones({6, 6}), future, 0.0);
  const Tensor masked_simple = weights * tril;
  const Tensor renormalised = masked_simple / sum(masked_simple, -1, true);
  const Tensor masked = masked_fill(scores, future, -kInf);
  const Tensor causal = softmax(masked / scale, -1);

  CHECK(max_abs_diff(renormalised, causal) <= 1e-6);
  CHECK(off_by(sum(causal, -1), {1, 1, 1, 1, 1, 1}) <= 1e-6);
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 6; ++j) {
      CHECK(tril.at({i, j}) == (j <= i ? 1.0 : 0.0));
      if (j > i) {
        CHECK(causal.at({i, j}) == 0.0);
        CHECK(masked.at({i, j}) == -kInf);
      }
    }
  CHECK(causal.at({0, 0}) == 1.0);                                           // the first token sees only itself
  CHECK(max_abs_diff(select(causal, 0, 5), select(weights, 0, 5)) <= 1e-6);  // the last sees everything
}

TEST_CASE("walkthrough: dropout 0.5 zeroes about half and doubles the survivors") {
  const auto rng = std::make_shared<Generator>(123);
  const nn::Dropout dropout(0.5, rng);
  REQUIRE(dropout.is_training());
  const Tensor small = dropout.forward(ones({6, 6}));
  int64_t zeroed = 0, doubled = 0;
  for (double v : small.to_vector()) {
    if (v == 0)
      ++zeroed;
    else if (v == 2)
      ++doubled;
  }
  CHECK(zeroed + doubled == 36);  // nothing but 0 and 1 / (1 - 0.5) = 2
  CHECK(zeroed >= 8);
  CHECK(doubled >= 8);

  const Tensor large = dropout.forward(ones({200, 200}));
  int64_t large_zeroed = 0, large_other = 0;
  for (double v : large.to_vector()) {
    if (v == 0)
      ++large_zeroed;
    else if (v != 2)
      ++large_other;
  }
  CHECK(large_other == 0);
  CHECK(large_zeroed / 40000.0 == Approx(0.5).margin(0.02));  // 8 standard deviations of the fraction

  // The same seed over the causal weights: the same mask, the survivors doubled.
  Generator gen(789);
  const seed::SelfAttentionV2 sa_v2(3, 2, false, gen);
  const Tensor inputs = journey_inputs();
  const Tensor scores = matmul(sa_v2.W_query().forward(inputs), transpose(sa_v2.W_key().forward(inputs), 0, 1));
  const Tensor weights = softmax(masked_fill(scores, nn::causal_mask(6), -kInf) / std::sqrt(2.0), -1);
  rng->reseed(123);
  const Tensor dropped = dropout.forward(weights);
  const std::vector<double> pattern = small.to_vector(), w = weights.to_vector(), d = dropped.to_vector();
  for (size_t i = 0; i < d.size(); ++i) CHECK(d[i] == Approx(pattern[i] * w[i]).margin(1e-7));

  const nn::Dropout p02(0.2, std::make_shared<Generator>(5));  // survivors scaled by 1 / (1 - 0.2) = 1.25
  int64_t p02_zeroed = 0, p02_other = 0;
  for (double v : p02.forward(ones({20, 20})).to_vector()) {
    if (v == 0)
      ++p02_zeroed;
    else if (std::fabs(v - 1.25) > 1e-6)
      ++p02_other;
  }
  CHECK(p02_other == 0);
  CHECK(p02_zeroed > 0);
}

// ---- §3.5.3 and §3.6: the modules ----

TEST_CASE("walkthrough: CausalAttention on the batch of two gives (2, 6, 2) with identical rows") {
  const Tensor batch = stack_twice(journey_inputs());
  REQUIRE(batch.shape() == Shape({2, 6, 3}));
  Generator gen(123);
  const seed::CausalAttention ca({.d_in = 3, .d_out = 2, .context_length = 6, .dropout = 0.0}, gen, nullptr);
  CHECK(parameter_names(ca) == std::vector<std::string>{"W_query.weight", "W_key.weight", "W_value.weight"});
  const Tensor out = ca.forward(batch);
  REQUIRE(out.shape() == Shape({2, 6, 2}));
  CHECK(max_abs_diff(select(out, 0, 0), select(out, 0, 1)) == 0.0);
  // The first token attends only to itself: its context vector is its own value vector.
  CHECK(max_abs_diff(select(select(out, 0, 0), 0, 0), ca.W_value().forward(select(journey_inputs(), 0, 0))) <= 1e-6);
  // The last token attends to every token: its row is SelfAttentionV2's with the same Generator(123) weights.
  Generator gen_v2(123);
  const seed::SelfAttentionV2 sa_v2(3, 2, false, gen_v2);
  CHECK(max_abs_diff(select(select(out, 0, 0), 0, 5), select(sa_v2.forward(journey_inputs()), 0, 5)) <= 1e-6);
}

TEST_CASE("walkthrough: CausalAttention is causal, handles T < context_length and refuses T > context_length") {
  Generator gen(4);
  const seed::CausalAttention ca({.d_in = 3, .d_out = 2, .context_length = 6}, gen, nullptr);
  const Tensor x = randn({1, 5, 3}, gen);
  std::vector<double> later = x.to_vector();
  for (size_t i = 9; i < later.size(); ++i) later[i] += 1.0;  // change tokens 3 and 4
  const Tensor out = ca.forward(x), out_later = ca.forward(tensor(later, {1, 5, 3}));
  REQUIRE(out.shape() == Shape({1, 5, 2}));
  CHECK(max_abs_diff(slice(out, 1, 0, 3), slice(out_later, 1, 0, 3)) == 0.0);
  CHECK(max_abs_diff(slice(out, 1, 3, 5), slice(out_later, 1, 3, 5)) > 1e-4);
  CHECK_THROWS_AS(ca.forward(randn({1, 7, 3}, gen)), ShapeError);
  CHECK_THROWS_AS(ca.forward(randn({5, 3}, gen)), ShapeError);
  CHECK_THROWS_AS(ca.forward(randn({1, 5, 4}, gen)), ShapeError);
}

TEST_CASE("walkthrough: CausalAttention's dropout acts in training mode only") {
  const Tensor batch = stack_twice(journey_inputs());
  Generator gen_a(123), gen_b(123);
  seed::CausalAttention dropping({.d_in = 3, .d_out = 2, .context_length = 6, .dropout = 0.5}, gen_a,
                                 std::make_shared<Generator>(1));
  const seed::CausalAttention plain({.d_in = 3, .d_out = 2, .context_length = 6}, gen_b, nullptr);
  CHECK(max_abs_diff(dropping.forward(batch), plain.forward(batch)) > 1e-3);
  dropping.eval();
  CHECK(max_abs_diff(dropping.forward(batch), plain.forward(batch)) == 0.0);
  CHECK_THROWS_AS(seed::CausalAttention({.d_in = 3, .d_out = 2, .context_length = 6, .dropout = 0.5}, gen_a, nullptr),
                  ValueError);
}

TEST_CASE("walkthrough: MultiHeadAttentionWrapper gives (2, 6, 4), the concatenation of its heads") {
  const Tensor batch = stack_twice(journey_inputs());
  Generator gen(123);
  const seed::MultiHeadAttentionWrapper mha(
      {.d_in = 3, .d_out = 2, .context_length = 6, .dropout = 0.0, .num_heads = 2}, gen, nullptr);
  CHECK(parameter_names(mha) == std::vector<std::string>{"heads.0.W_query.weight", "heads.0.W_key.weight",
                                                         "heads.0.W_value.weight", "heads.1.W_query.weight",
                                                         "heads.1.W_key.weight", "heads.1.W_value.weight"});
  const Tensor out = mha.forward(batch);
  REQUIRE(out.shape() == Shape({2, 6, 4}));
  REQUIRE(mha.num_heads() == 2);
  for (size_t h = 0; h < 2; ++h) {
    const int64_t from = static_cast<int64_t>(2 * h);
    CHECK(max_abs_diff(slice(out, -1, from, from + 2), mha.head(h).forward(batch)) == 0.0);
  }
  // Head 0 draws first from Generator(123), so it is the CausalAttention of §3.5.3.
  Generator gen_ca(123);
  const seed::CausalAttention ca({.d_in = 3, .d_out = 2, .context_length = 6}, gen_ca, nullptr);
  CHECK(max_abs_diff(slice(out, -1, 0, 2), ca.forward(batch)) == 0.0);
  CHECK(max_abs_diff(slice(out, -1, 0, 2), slice(out, -1, 2, 4)) > 1e-3);  // the heads differ
}

TEST_CASE("walkthrough: exercise 3.2, d_out = 1 per head plus an output projection, gives (2, 6, 2)") {
  const Tensor batch = stack_twice(journey_inputs());
  Generator gen(123);
  const seed::MultiHeadAttentionWrapper mha(
      {.d_in = 3, .d_out = 1, .context_length = 6, .dropout = 0.0, .num_heads = 2, .out_proj = true}, gen, nullptr);
  CHECK(parameter_names(mha) == std::vector<std::string>{"heads.0.W_query.weight", "heads.0.W_key.weight",
                                                         "heads.0.W_value.weight", "heads.1.W_query.weight",
                                                         "heads.1.W_key.weight", "heads.1.W_value.weight",
                                                         "out_proj.weight", "out_proj.bias"});
  const Tensor out = mha.forward(batch);
  REQUIRE(out.shape() == Shape({2, 6, 2}));
  REQUIRE(mha.out_proj() != nullptr);
  const Tensor heads = concat({mha.head(0).forward(batch), mha.head(1).forward(batch)}, -1);
  CHECK(max_abs_diff(out, mha.out_proj()->forward(heads)) <= 1e-6);
}

TEST_CASE("walkthrough: SeedMultiHeadAttention gives (2, 6, 2) with the seed's parameter names") {
  const Tensor batch = stack_twice(journey_inputs());
  Generator gen(123);
  const seed::SeedMultiHeadAttention mha({.d_in = 3, .d_out = 2, .context_length = 6, .dropout = 0.0, .num_heads = 2},
                                         gen, nullptr);
  CHECK(parameter_names(mha) == std::vector<std::string>{"W_query.weight", "W_key.weight", "W_value.weight",
                                                         "out_proj.weight", "out_proj.bias"});
  const Tensor out = mha.forward(batch);
  REQUIRE(out.shape() == Shape({2, 6, 2}));
  CHECK(max_abs_diff(select(out, 0, 0), select(out, 0, 1)) == 0.0);
  CHECK(mha.head_dim() == 1);
  Generator gen_bad(1);
  CHECK_THROWS_AS(
      seed::SeedMultiHeadAttention({.d_in = 3, .d_out = 3, .context_length = 6, .num_heads = 2}, gen_bad, nullptr),
      ValueError);
  CHECK_THROWS_AS(mha.forward(randn({2, 7, 3}, gen_bad)), ShapeError);
}

TEST_CASE("walkthrough: SeedMultiHeadAttention with one head is CausalAttention followed by out_proj") {
  const Tensor batch = stack_twice(journey_inputs());
  Generator gen_mha(123), gen_ca(123);  // both draw W_query, W_key, W_value first, in that order
  const seed::SeedMultiHeadAttention mha({.d_in = 3, .d_out = 2, .context_length = 6, .dropout = 0.0, .num_heads = 1},
                                         gen_mha, nullptr);
  const seed::CausalAttention ca({.d_in = 3, .d_out = 2, .context_length = 6}, gen_ca, nullptr);
  CHECK(max_abs_diff(mha.forward(batch), mha.out_proj().forward(ca.forward(batch))) <= 1e-6);
}

TEST_CASE("walkthrough: weight splitting equals the wrapper with the heads' weights stacked and out_proj = I") {
  const Tensor batch = stack_twice(journey_inputs());
  Generator gen_w(123), gen_s(7);
  const seed::MultiHeadAttentionWrapper wrapper(
      {.d_in = 3, .d_out = 2, .context_length = 6, .dropout = 0.0, .num_heads = 2}, gen_w, nullptr);
  seed::SeedMultiHeadAttention split({.d_in = 3, .d_out = 4, .context_length = 6, .dropout = 0.0, .num_heads = 2},
                                     gen_s, nullptr);
  const seed::CausalAttention &h0 = wrapper.head(0), &h1 = wrapper.head(1);
  split.load_state_dict({{"W_query.weight", concat({h0.W_query().weight, h1.W_query().weight}, 0)},
                         {"W_key.weight", concat({h0.W_key().weight, h1.W_key().weight}, 0)},
                         {"W_value.weight", concat({h0.W_value().weight, h1.W_value().weight}, 0)},
                         {"out_proj.weight", identity(4)},
                         {"out_proj.bias", zeros({4})}});
  CHECK(max_abs_diff(split.forward(batch), wrapper.forward(batch)) <= 1e-6);
}

TEST_CASE("walkthrough: SeedMultiHeadAttention equals nn::MultiHeadAttention given the same weights") {
  Generator gen(11);
  seed::SeedMultiHeadAttention mine({.d_in = 4, .d_out = 4, .context_length = 8, .dropout = 0.0, .num_heads = 2}, gen,
                                    nullptr);
  nn::MultiHeadAttention library({.d_model = 4, .n_heads = 2, .bias = true}, gen, nullptr);
  mine.to(DType::float64);
  library.to(DType::float64);
  library.load_state_dict(
      {{"in_proj_weight", concat({mine.W_query().weight, mine.W_key().weight, mine.W_value().weight}, 0)},
       {"in_proj_bias", zeros({12}, DType::float64)},
       {"out_proj.weight", mine.out_proj().weight},
       {"out_proj.bias", mine.out_proj().bias}});
  const Tensor x = randn({3, 5, 4}, gen, DType::float64);
  const Tensor theirs = library.forward(x, x, x, nn::causal_mask(5)).output;
  CHECK(max_abs_diff(mine.forward(x), theirs) <= 1e-12);
}

TEST_CASE("walkthrough: exercise 3.3, MultiHeadAttention(768, 768, 1024 tokens, 12 heads) has 2,360,064 parameters") {
  Generator gen(123);
  const seed::SeedMultiHeadAttention mha(
      {.d_in = 768, .d_out = 768, .context_length = 1024, .dropout = 0.0, .num_heads = 12, .qkv_bias = false}, gen,
      nullptr);
  CHECK(mha.parameter_count() == 2360064);
  CHECK(mha.parameter_count() == 3 * 768 * 768 + (768 * 768 + 768));  // W_q, W_k, W_v without bias; out_proj
  const nn::NamedTensors params = mha.named_parameters();
  REQUIRE(params.size() == 5);
  for (size_t i = 0; i < 4; ++i) CHECK(params[i].second.shape() == Shape({768, 768}));
  CHECK(params[4].first == "out_proj.bias");
  CHECK(params[4].second.shape() == Shape({768}));
  CHECK(mha.head_dim() == 64);
  // The heads split the projections, so the count does not depend on num_heads.
  const seed::SeedMultiHeadAttention one_head({.d_in = 768, .d_out = 768, .context_length = 1024, .num_heads = 1}, gen,
                                              nullptr);
  CHECK(one_head.parameter_count() == 2360064);
}

// ---- gradient checks: the input and every named parameter, float64, dropout 0 ----

// With qkv_bias, W_key.bias has an exactly zero gradient: it adds q·b_k to every score of a query's row, and
// softmax ignores a shift of its whole row. The check still compares it (0 against a numeric ~1e-16).
TEST_CASE("walkthrough: gradcheck of CausalAttention over the input and every parameter") {
  for (bool qkv_bias : {false, true}) {
    Generator gen(21);
    seed::CausalAttention ca({.d_in = 3, .d_out = 2, .context_length = 6, .dropout = 0.0, .qkv_bias = qkv_bias}, gen,
                             nullptr);
    const GradcheckResult result = gradcheck_module(ca, {2, 5, 3}, 22);  // T = 5 < context_length: a sliced mask
    INFO("qkv_bias = " << qkv_bias << "\n" << result.str());
    CHECK(result.passed);
    CHECK(result.inputs.size() == (qkv_bias ? 7u : 4u));
  }
}

TEST_CASE("walkthrough: gradcheck of SeedMultiHeadAttention over the input and every parameter") {
  for (bool qkv_bias : {false, true}) {
    Generator gen(31);
    seed::SeedMultiHeadAttention mha(
        {.d_in = 3, .d_out = 4, .context_length = 6, .dropout = 0.0, .num_heads = 2, .qkv_bias = qkv_bias}, gen,
        nullptr);
    const GradcheckResult result = gradcheck_module(mha, {2, 6, 3}, 32);
    INFO("qkv_bias = " << qkv_bias << "\n" << result.str());
    CHECK(result.passed);
    CHECK(result.inputs.size() == (qkv_bias ? 9u : 6u));
  }
}

TEST_CASE("walkthrough: gradcheck of the wrapper with out_proj and of SelfAttentionV1 and V2") {
  Generator gen(41);
  seed::MultiHeadAttentionWrapper wrapper(
      {.d_in = 3, .d_out = 1, .context_length = 6, .dropout = 0.0, .num_heads = 2, .out_proj = true}, gen, nullptr);
  const GradcheckResult w = gradcheck_module(wrapper, {2, 4, 3}, 42);
  INFO(w.str());
  CHECK(w.passed);
  seed::SelfAttentionV1 v1(3, 2, gen);
  const GradcheckResult r1 = gradcheck_module(v1, {6, 3}, 43);
  INFO(r1.str());
  CHECK(r1.passed);
  seed::SelfAttentionV2 v2(3, 2, true, gen);
  const GradcheckResult r2 = gradcheck_module(v2, {2, 6, 3}, 44);
  INFO(r2.str());
  CHECK(r2.passed);
}
