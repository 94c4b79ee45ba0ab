// dropout: survivors scaled by exactly 1/(1-p), the rest zero, the mask drawn one uniform per element in
// row-major order, the identity in evaluation, and p outside [0, 1) refused.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "autograd/autograd.h"

using namespace tapegrad;

TEST_CASE("dropout: p = 0.5 scales survivors by exactly 2, zeros the rest, and drops about half") {
  Generator data(31), gen(32);
  const Tensor x = randn({100, 100}, data);  // no exact zeros
  const Tensor y = dropout(x, 0.5, /*training=*/true, gen);
  REQUIRE(y.shape() == x.shape());
  const float* in = x.data<float>();
  const float* out = y.data<float>();
  int64_t dropped = 0, wrong = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (out[i] == 0)
      ++dropped;
    else if (out[i] != 2 * in[i])
      ++wrong;
  }
  CHECK(wrong == 0);
  // 10,000 Bernoulli(0.5) draws: standard deviation of the fraction 0.005; allow 4 of them.
  CHECK(std::fabs(static_cast<double>(dropped) / x.numel() - 0.5) < 0.02);
}

TEST_CASE("dropout: the mask is u >= p with one gen.uniform() per element, so the same seed gives the same mask") {
  const Tensor x = ones({7, 9}, DType::float64);
  Generator gen(33), replay(33);
  const Tensor y = dropout(x, 0.3, true, gen);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool keep = replay.uniform() >= 0.3;
    CHECK(y.data<double>()[i] == (keep ? 1 / (1 - 0.3) : 0.0));
  }
  CHECK(gen.next_u64() == replay.next_u64());  // exactly numel draws were taken

  Generator again(33);
  CHECK(dropout(x, 0.3, true, again).to_vector() == y.to_vector());
  CHECK(dropout(x, 0.3, true, again).to_vector() != y.to_vector());  // the stream moved on
}

TEST_CASE("dropout: a transposed view draws its mask in its own row-major order") {
  Generator data(34);
  const Tensor base = randn({3, 5}, data, DType::float64);
  const Tensor view = transpose(base, 0, 1);  // (5, 3), not contiguous
  Generator a(35), b(35);
  CHECK(dropout(view, 0.4, true, a).to_vector() == dropout(view.contiguous(), 0.4, true, b).to_vector());
}

TEST_CASE("dropout: backward is dy ⊙ mask / (1 - p)") {
  Generator data(36), gen(37);
  Tensor x = randn({4, 6}, data, DType::float64).requires_grad_();
  const Tensor dy = randn({4, 6}, data, DType::float64);
  const Tensor y = dropout(x, 0.25, true, gen);
  CHECK(y.requires_grad());
  backward(y, dy);
  int64_t kept = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool keep = y.data<double>()[i] != 0;
    kept += keep;
    CHECK(x.grad().data<double>()[i] == (keep ? dy.data<double>()[i] * (1 / 0.75) : 0.0));
  }
  CHECK(kept > 0);
  CHECK(kept < x.numel());
}

TEST_CASE("dropout: evaluation mode and p = 0 return the same tensor and draw nothing") {
  Generator data(38);
  Tensor x = randn({3, 4}, data).requires_grad_();
  Generator gen(39), untouched(39);
  const Tensor eval = dropout(x, 0.5, /*training=*/false, gen);
  CHECK(eval.same(x));
  const Tensor p0 = dropout(x, 0.0, /*training=*/true, gen);
  CHECK(p0.same(x));
  CHECK(gen.next_u64() == untouched.next_u64());
}

TEST_CASE("dropout: p outside 0 <= p < 1 and non-float inputs throw") {
  Generator gen(40);
  const Tensor x = ones({2, 3});
  CHECK_THROWS_AS(dropout(x, 1.0, true, gen), ValueError);
  CHECK_THROWS_AS(dropout(x, -0.1, true, gen), ValueError);
  CHECK_THROWS_AS(dropout(x, std::numeric_limits<double>::quiet_NaN(), true, gen), ValueError);
  CHECK_THROWS_AS(dropout(x, 1.5, false, gen), ValueError);  // checked in evaluation mode too
  CHECK_THROWS_WITH(dropout(x, 1.0, true, gen),
                    Catch::Matchers::Contains("dropout") && Catch::Matchers::Contains("[0, 1)"));
  CHECK_THROWS_AS(dropout(ids({1, 2}, {2}), 0.5, true, gen), DTypeError);
}
