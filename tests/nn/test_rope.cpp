// RoPE (nn/rope.h, seed 003 §4.4): the rotation by hand, scores that depend on relative position only,
// the component in attention and in a classifier, and its gradient checks.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/attention.h"
#include "nn/classifier.h"
#include "nn/rope.h"
#include "nn/positions.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {

/// <a, b> of two (D) tensors.
double dot(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

/// v placed at every one of T positions and rotated: row m is R_m v.   v: (D) -> (T, D)
Tensor rotated_at_all_positions(const Tensor& v, int64_t T) {
  return rotary_embedding(expand(unsqueeze(v, 0), Shape{T, v.size(0)}).contiguous());
}

const GradcheckCase& gradcheck_case(const std::string& name) {
  for (const GradcheckCase& c : gradcheck_cases())
    if (c.name == name) return c;
  FAIL("no gradcheck case " << name);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("nn: rotary_embedding rotates each pair (2i, 2i+1) at position m by m·10000^(-2i/D)") {
  // D = 4: θ_0 = 1, θ_1 = 10000^(-1/2) = 0.01. Position 0 is unchanged.
  const Tensor x = tensor({1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4}, {3, 4}, DType::float64);
  const Tensor y = rotary_embedding(x);
  for (int64_t m = 0; m < 3; ++m) {
    const double a0 = m * 1.0, a1 = m * 0.01;
    CHECK(y.at({m, 0}) == Approx(1 * std::cos(a0) - 2 * std::sin(a0)).margin(1e-15));
    CHECK(y.at({m, 1}) == Approx(1 * std::sin(a0) + 2 * std::cos(a0)).margin(1e-15));
    CHECK(y.at({m, 2}) == Approx(3 * std::cos(a1) - 4 * std::sin(a1)).margin(1e-15));
    CHECK(y.at({m, 3}) == Approx(3 * std::sin(a1) + 4 * std::cos(a1)).margin(1e-15));
  }
  CHECK_THROWS_AS(rotary_embedding(zeros({3, 5}, DType::float64)), ValueError);  // odd D has no pairs
}

TEST_CASE("nn: with RoPE the score of q at m and k at n depends only on n - m") {
  Generator gen(3);
  const int64_t D = 8, T = 12;
  const Tensor q = randn({D}, gen, DType::float64), k = randn({D}, gen, DType::float64);
  const Tensor rq = rotated_at_all_positions(q, T), rk = rotated_at_all_positions(k, T);
  const auto score = [&](int64_t m, int64_t n) { return dot(select(rq, 0, m), select(rk, 0, n)); };
  for (const auto& [m, n] : {std::pair<int64_t, int64_t>{0, 3}, {2, 1}, {4, 4}, {1, 7}})
    for (int64_t s = 1; m + s < T && n + s < T; ++s) CHECK(score(m + s, n + s) == Approx(score(m, n)).epsilon(1e-12));
  // ... and does depend on it (a rotation that did nothing would pass the line above).
  CHECK(std::fabs(score(0, 3) - score(0, 4)) > 1e-3);
  CHECK(std::fabs(score(0, 3) - dot(q, k)) > 1e-3);
}

TEST_CASE("nn: the rope component adds nothing, has no parameters and rotates q and k in attention") {
  ClassifierOptions o = micro_classifier();
  o.positional = "rope";
  Generator init(5);
  const SequenceClassifier model(o, init, nullptr);
  CHECK(parameter_count(o) == model.parameter_count());
  for (const auto& [name, p] : model.named_parameters()) CHECK(name.rfind("pos_embed", 0) != 0);
  CHECK_FALSE(model.pos_embed().forward(4, DType::float32).defined());

  // Mean pooling without positions cannot tell a sequence from its reverse; with RoPE it can.
  const Tensor forwards = ids({1, 2, 3, 4}, {1, 4}), backwards = ids({4, 3, 2, 1}, {1, 4});
  CHECK(max_abs_diff(model.forward(forwards), model.forward(backwards)) > 1e-4);
  CHECK_THROWS_AS([&] {
    ClassifierOptions odd = micro_classifier();
    odd.positional = "rope";
    odd.d_model = 6;
    odd.n_heads = 2;  // D = 3
    Generator g(0);
    SequenceClassifier m(odd, g, nullptr);
  }(), ValueError);
}

TEST_CASE("nn: attention with RoPE equals attention on rotated q and k, and a no-op encoding leaves it unchanged") {
  Generator gen(7);
  const MultiHeadAttention mha({8, 2}, gen, nullptr);
  const Tensor x = randn({2, 5, 8}, gen);
  const RotaryPositionalEncoding rope(16);
  // The composed computation: project, split heads, rotate, attend, merge, project.
  const Tensor qkv = linear(x, mha.in_proj_weight, mha.in_proj_bias);
  const std::vector<Tensor> parts = split(qkv, 8, -1);
  const auto heads = [](const Tensor& t) { return transpose(reshape(t, {2, 5, 2, 4}), 1, 2); };
  const Tensor out = scaled_dot_product_attention(rotary_embedding(heads(parts[0])), rotary_embedding(heads(parts[1])),
                                                  heads(parts[2]))
                         .output;
  const Tensor expected = mha.out_proj().forward(reshape(transpose(out, 1, 2), {2, 5, 8}));
  CHECK(max_abs_diff(mha.attend(x, {}, {}, false, &rope).output, expected) < 1e-6);
  CHECK(max_abs_diff(mha.attend(x, {}, {}, false).output, expected) > 1e-3);
  // Sinusoidal positions act outside attention only: the fused path, the same numbers as no encoding.
  const SinusoidalPositionalEncoding sines(16, 8);
  CHECK(max_abs_diff(mha.attend(x, {}, {}, false, &sines).output, mha.attend(x, {}, {}, false).output) == 0);
}

TEST_CASE("nn: the rope gradient checks pass in float64") {
  for (const char* name : {"nn/rope/rotary_embedding", "nn/rope/self-attention"}) {
    const GradcheckResult result = gradcheck_case(name).run(GradcheckOptions::float64());
    INFO(name << "\n" << result.str());
    CHECK(result.passed);
    CHECK(result.max_abs_error() < 1e-7);
  }
}
