// Positions: learned absolute position embeddings (seed 001, example 2.3) and fixed sinusoids (seed 003
// §4.2): values, shapes, gradients, the rotation property, and context-length errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "autograd/autograd.h"
#include "nn/embedding.h"
#include "nn/positions.h"

using namespace tapegrad;
using namespace tapegrad::nn;

TEST_CASE("nn: PositionalEmbedding returns the first T rows of its table") {
  Generator gen(0);
  const PositionalEmbedding positions(12, 16, gen);
  const NamedTensors params = positions.named_parameters();
  REQUIRE(params.size() == 1);
  CHECK(params[0].first == "weight");  // an nn.Embedding(12, 16) in PyTorch
  CHECK(params[0].second.shape() == Shape{12, 16});
  const Tensor p = positions.forward(5);
  CHECK(p.shape() == Shape{5, 16});
  CHECK(max_abs_diff(p, slice(positions.weight, 0, 0, 5)) == 0);
  CHECK(positions.forward(12).shape() == Shape{12, 16});

  // Seed 001, example 2.3: token embeddings (1, 5, 16) + position embeddings of ids 0..4 -> (1, 5, 16).
  const Embedding tokens(5, 16, gen);
  const Tensor token_vectors = unsqueeze(tokens.forward(ids({0, 1, 2, 3, 4}, {5})), 0);
  const Tensor inputs = token_vectors + p;
  CHECK(inputs.shape() == Shape{1, 5, 16});
  CHECK(inputs.at({0, 3, 7}) == Approx(token_vectors.at({0, 3, 7}) + positions.weight.at({3, 7})));
}

TEST_CASE("nn: PositionalEmbedding is standard normal and only used positions get a gradient") {
  Generator gen(1);
  const PositionalEmbedding positions(64, 64, gen);
  const std::vector<double> w = positions.weight.to_vector();
  double sum = 0, sq = 0;
  for (double v : w) sum += v, sq += v * v;
  CHECK(std::fabs(sum / w.size()) < 0.05);
  CHECK(std::sqrt(sq / w.size()) == Approx(1).epsilon(0.05));

  const PositionalEmbedding small(4, 2, gen);
  (randn({3, 3, 2}, gen) + small.forward(3)).backward(ones({3, 3, 2}));
  const Tensor dweight = small.weight.grad();
  // Rows 0..2 are summed over the batch of 3; row 3 is unused.
  for (int64_t c = 0; c < 2; ++c) {
    for (int64_t row = 0; row < 3; ++row) CHECK(dweight.at({row, c}) == 3);
    CHECK(dweight.at({3, c}) == 0);
  }
}

TEST_CASE("nn: a sequence longer than the context is a ShapeError naming both lengths") {
  Generator gen(2);
  const PositionalEmbedding learned(12, 4, gen);
  const SinusoidalPositionalEncoding fixed(12, 4);
  CHECK_THROWS_AS(learned.forward(13), ShapeError);
  CHECK_THROWS_WITH(learned.forward(13),
                    Catch::Matchers::Contains("sequence length 13") && Catch::Matchers::Contains("context length 12"));
  CHECK_THROWS_AS(fixed.forward(20), ShapeError);
  CHECK_THROWS_WITH(fixed.forward(20),
                    Catch::Matchers::Contains("sequence length 20") && Catch::Matchers::Contains("context length 12"));
  CHECK_THROWS_AS(learned.forward(-1), ValueError);
  CHECK_THROWS_AS(PositionalEmbedding(0, 4, gen), ValueError);
  CHECK_THROWS_AS(SinusoidalPositionalEncoding(8, 0), ValueError);
  CHECK_THROWS_AS(fixed.forward(2, DType::int64), DTypeError);
}

TEST_CASE("nn: SinusoidalPositionalEncoding has the values of the formula") {
  const SinusoidalPositionalEncoding pe(10, 4);
  CHECK(pe.parameter_count() == 0);
  const Tensor t = pe.forward(4, DType::float64);
  CHECK(t.shape() == Shape{4, 4});
  CHECK(t.dtype() == DType::float64);
  CHECK_FALSE(t.requires_grad());
  // d = 4: columns 0, 1 turn at frequency 1, columns 2, 3 at 1/10000^(2/4) = 1/100.
  CHECK(t.to_vector()[0] == 0);  // position 0 is [0, 1, 0, 1]
  CHECK(t.at({0, 1}) == 1);
  CHECK(t.at({0, 2}) == 0);
  CHECK(t.at({0, 3}) == 1);
  CHECK(t.at({1, 0}) == Approx(0.8414709848078965).epsilon(1e-12));    // sin 1
  CHECK(t.at({1, 1}) == Approx(0.5403023058681398).epsilon(1e-12));    // cos 1
  CHECK(t.at({1, 2}) == Approx(0.009999833334166664).epsilon(1e-12));  // sin 0.01
  CHECK(t.at({2, 0}) == Approx(0.9092974268256817).epsilon(1e-12));    // sin 2
  CHECK(t.at({2, 1}) == Approx(-0.4161468365471424).epsilon(1e-12));   // cos 2
  CHECK(t.at({3, 2}) == Approx(0.02999550020249566).epsilon(1e-12));   // sin 0.03
  CHECK(t.at({3, 3}) == Approx(0.9995500337489875).epsilon(1e-12));    // cos 0.03
  // float32 by default, the same numbers rounded.
  const Tensor t32 = pe.forward(4);
  CHECK(t32.dtype() == DType::float32);
  CHECK(max_abs_diff(t32.to(DType::float64), t) < 1e-7);
  // An odd dim ends with a sine column: d = 3 has frequencies 1 (cols 0, 1) and 1/10000^(2/3) (col 2).
  const Tensor odd = SinusoidalPositionalEncoding(5, 3).forward(5, DType::float64);
  CHECK(odd.at({4, 2}) == Approx(std::sin(4 / std::pow(10000.0, 2.0 / 3))).epsilon(1e-12));
}

TEST_CASE("nn: SinusoidalPositionalEncoding matches the seed's exp/log form at d = 128") {
  // Seed 003 §4.2 computes div_term = exp(2i · -(ln 10000 / d)); the two forms agree to rounding.
  const int64_t d = 128, len = 100;
  const std::vector<double> pe = SinusoidalPositionalEncoding(len, d).forward(len, DType::float64).to_vector();
  double worst = 0;
  for (int64_t pos = 0; pos < len; ++pos)
    for (int64_t c = 0; c < d; c += 2) {
      const double angle = static_cast<double>(pos) * std::exp(static_cast<double>(c) * -(std::log(10000.0) / d));
      worst = std::max(worst, std::fabs(pe[pos * d + c] - std::sin(angle)));
      worst = std::max(worst, std::fabs(pe[pos * d + c + 1] - std::cos(angle)));
    }
  CHECK(worst < 1e-12);
}

TEST_CASE("nn: sinusoidal positions are rotations so their dot products depend only on the offset") {
  // Seed 003 §4.3: PE(pos + k) is PE(pos) with each pair (sin, cos) turned by k·ω_i.
  const int64_t d = 16;
  const Tensor pe = SinusoidalPositionalEncoding(64, d).forward(64, DType::float64);
  auto dot = [&](int64_t p, int64_t q) {
    double s = 0;
    for (int64_t c = 0; c < d; ++c) s += pe.at({p, c}) * pe.at({q, c});
    return s;
  };
  for (int64_t k : {1, 5, 17}) {
    CHECK(dot(0, k) == Approx(dot(10, 10 + k)).epsilon(1e-12));
    CHECK(dot(3, 3 + k) == Approx(dot(40, 40 + k)).epsilon(1e-12));
  }
  CHECK(dot(7, 7) == Approx(d / 2.0).epsilon(1e-12));  // each pair lies on the unit circle
  const int64_t pos = 9, k = 4;
  for (int64_t c = 0; c < d; c += 2) {
    const double w = 1.0 / std::pow(10000.0, static_cast<double>(c) / d);
    const double s = pe.at({pos, c}), co = pe.at({pos, c + 1});
    CHECK(pe.at({pos + k, c}) == Approx(s * std::cos(k * w) + co * std::sin(k * w)).margin(1e-12));
    CHECK(pe.at({pos + k, c + 1}) == Approx(co * std::cos(k * w) - s * std::sin(k * w)).margin(1e-12));
  }
}
