// The numbers printed in seed 002 (ch. 3 of "Build a Large Language Model From Scratch"), recomputed with
// tapegrad ops: the attention scores, weights and context vectors of "Your journey starts with one step",
// naive vs stable softmax, and the 4-D batched matmul example. Printed values have 4 decimals, so a match
// is |ours - printed| <= 5e-5 (plus float32 rounding).
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/autograd.h"

using namespace tapegrad;

namespace {

constexpr double kPrinted = 5e-5 + 1e-6;

/// The six 3-d embeddings, one row per token of "Your journey starts with one step".
Tensor journey_inputs() {
  return tensor({0.43, 0.15, 0.89,   // Your     (x^1)
                 0.55, 0.87, 0.66,   // journey  (x^2)
                 0.57, 0.85, 0.64,   // starts   (x^3)
                 0.22, 0.58, 0.33,   // with     (x^4)
                 0.77, 0.25, 0.10,   // one      (x^5)
                 0.05, 0.80, 0.55},  // step     (x^6)
                {6, 3});
}

/// Largest |a - printed| over all elements.
double off_by(const Tensor& a, const std::vector<double>& printed) {
  const std::vector<double> values = a.to_vector();
  REQUIRE(values.size() == printed.size());
  double worst = 0;
  for (size_t i = 0; i < values.size(); ++i) worst = std::max(worst, std::fabs(values[i] - printed[i]));
  return worst;
}

/// exp(x) / sum exp(x) along the last dim, with no max subtracted.
Tensor naive_softmax(const Tensor& x) {
  const Tensor e = exp(x);
  return e / sum(e, -1, /*keepdim=*/true);
}

bool any_nonfinite(const Tensor& t) {
  for (double v : t.to_vector())
    if (!std::isfinite(v)) return true;
  return false;
}

const std::vector<double> kScores = {0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310,  //
                                     0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865,  //
                                     0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605,  //
                                     0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565,  //
                                     0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935,  //
                                     0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450};
const std::vector<double> kWeights = {0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452,  //
                                      0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581,  //
                                      0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565,  //
                                      0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720,  //
                                      0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295,  //
                                      0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896};
const std::vector<double> kContext = {0.4421, 0.5931, 0.5790,  //
                                      0.4419, 0.6515, 0.5683,  //
                                      0.4431, 0.6496, 0.5671,  //
                                      0.4304, 0.6298, 0.5510,  //
                                      0.4671, 0.5910, 0.5266,  //
                                      0.4177, 0.6503, 0.5645};

}  // namespace

TEST_CASE("seed: inputs @ inputsᵀ equals the printed 6x6 attention scores") {
  const Tensor inputs = journey_inputs();
  const Tensor scores = matmul(inputs, transpose(inputs, 0, 1));
  REQUIRE(scores.shape() == Shape{6, 6});
  CHECK(off_by(scores, kScores) <= kPrinted);
  // Row 2 alone (query x^2), as the notebook first computes it: 0.9544 1.4950 1.4754 0.8434 0.7070 1.0865.
  const Tensor query = select(inputs, 0, 1);
  CHECK(off_by(matmul(inputs, query), {0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865}) <= kPrinted);
}

TEST_CASE("seed: the row softmax of the scores equals the printed 6x6 attention weights") {
  const Tensor inputs = journey_inputs();
  const Tensor weights = softmax(matmul(inputs, transpose(inputs, 0, 1)), -1);
  CHECK(off_by(weights, kWeights) <= kPrinted);
  for (int64_t row = 0; row < 6; ++row) {
    double total = 0;
    for (int64_t k = 0; k < 6; ++k) total += weights.at({row, k});
    CHECK(total == Approx(1).epsilon(1e-6));
  }
}

TEST_CASE("seed: weights @ inputs equals the printed 6x3 context vectors") {
  const Tensor inputs = journey_inputs();
  const Tensor weights = softmax(matmul(inputs, transpose(inputs, 0, 1)), -1);
  const Tensor context = matmul(weights, inputs);
  REQUIRE(context.shape() == Shape{6, 3});
  CHECK(off_by(context, kContext) <= kPrinted);
  // z^(2) = [0.4419, 0.6515, 0.5683], the context vector of "journey" computed first in the notebook.
  CHECK(off_by(select(context, 0, 1), {0.4419, 0.6515, 0.5683}) <= kPrinted);
}

TEST_CASE("seed: naive softmax exp(x) / sum exp(x) equals the stable one on the scores") {
  const Tensor inputs = journey_inputs();
  const Tensor scores = matmul(inputs, transpose(inputs, 0, 1));
  CHECK(max_abs_diff(naive_softmax(scores), softmax(scores)) < 1e-6);
  // The notebook's attn_weights_2_naive for query x^2.
  CHECK(off_by(naive_softmax(select(scores, 0, 1)), {0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581}) <= kPrinted);
}

TEST_CASE("seed: on inputs of ±1000 the stable softmax stays finite where the naive one overflows") {
  const Tensor x = tensor({1000, 999, -1000, 0, -1000, -1001, -1002, -999}, {2, 4});
  const Tensor naive = naive_softmax(x);
  CHECK(any_nonfinite(select(naive, 0, 0)));  // exp(1000) = inf in float32 (and float64): inf / inf = nan
  CHECK(any_nonfinite(select(naive, 0, 1)));  // every exp underflows to 0: 0 / 0 = nan
  const Tensor stable = softmax(x);
  REQUIRE_FALSE(any_nonfinite(stable));
  const double z = 1 + std::exp(-1.0);
  CHECK(stable.at({0, 0}) == Approx(1 / z).epsilon(1e-6));
  CHECK(stable.at({0, 1}) == Approx(std::exp(-1.0) / z).epsilon(1e-6));
  CHECK(stable.at({0, 2}) == 0);
  // Row 1 is (-1000, -1001, -1002, -999): the largest is -999.
  const double z1 = std::exp(-1.0) + std::exp(-2.0) + std::exp(-3.0) + 1;
  CHECK(stable.at({1, 3}) == Approx(1 / z1).epsilon(1e-6));
  CHECK(stable.at({1, 0}) == Approx(std::exp(-1.0) / z1).epsilon(1e-6));
}

TEST_CASE("seed: the (1,2,3,4) tensor a gives the printed a @ aᵀ per head, batched and head by head") {
  // (batch b, heads, tokens, head_dim) = (1, 2, 3, 4)
  const Tensor a = tensor({0.2745, 0.6584, 0.2775, 0.8573,  //
                           0.8993, 0.0390, 0.9268, 0.7388,  //
                           0.7179, 0.7058, 0.9156, 0.4340,  //
                                                            //
                           0.0772, 0.3565, 0.1479, 0.5331,  //
                           0.4066, 0.2318, 0.4545, 0.9737,  //
                           0.4606, 0.5159, 0.4220, 0.5786},
                          {1, 2, 3, 4});
  const std::vector<double> first = {1.3208, 1.1631, 1.2879, 1.1631, 2.2150, 1.8424, 1.2879, 1.8424, 2.0402};
  const std::vector<double> second = {0.4391, 0.7003, 0.5903, 0.7003, 1.3737, 1.0620, 0.5903, 1.0620, 0.9912};
  const Tensor batched = matmul(a, transpose(a, 2, 3));
  REQUIRE(batched.shape() == Shape{1, 2, 3, 3});
  std::vector<double> both = first;
  both.insert(both.end(), second.begin(), second.end());
  CHECK(off_by(batched, both) <= kPrinted);

  for (int64_t h = 0; h < 2; ++h) {
    const Tensor head = select(select(a, 0, 0), 0, h);  // (3, 4)
    const Tensor per_head = matmul(head, transpose(head, 0, 1));
    CHECK(off_by(per_head, h == 0 ? first : second) <= kPrinted);
    CHECK(max_abs_diff(per_head, select(select(batched, 0, 0), 0, h)) < 1e-6);
  }
}
