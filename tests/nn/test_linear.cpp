// Linear: y = x Wᵀ + b against hand-computed numbers, PyTorch's names, shapes and default initialisation,
// any leading dims, and its errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "autograd/autograd.h"
#include "nn/linear.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {
/// Linear(3, 2) with W = [[1, 2, 3], [4, 5, 6]] and b = [0.5, -1].
Linear small_linear() {
  Generator gen(0);
  Linear lin(3, 2, true, gen);
  NoGradGuard no_grad;
  lin.weight.copy_(tensor({1, 2, 3, 4, 5, 6}, {2, 3}));
  lin.bias.copy_(tensor({0.5, -1}));
  return lin;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}
double std_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}
}  // namespace

TEST_CASE("nn: Linear computes x Wᵀ + b") {
  const Linear lin = small_linear();
  // [1, 0, -1]: 1 - 3 + 0.5 = -1.5,  4 - 6 - 1 = -3;   [2, 1, 0]: 2 + 2 + 0.5 = 4.5,  8 + 5 - 1 = 12
  const Tensor y = lin.forward(tensor({1, 0, -1, 2, 1, 0}, {2, 3}));
  CHECK(y.shape() == Shape{2, 2});
  CHECK(y.to_vector() == std::vector<double>{-1.5, -3, 4.5, 12});
  // A vector input gives a vector, as torch.nn.Linear does.
  CHECK(lin.forward(tensor({1, 0, -1})).to_vector() == std::vector<double>{-1.5, -3});
}

TEST_CASE("nn: Linear gradients are dW = dy^T x and db = sum dy and dx = dy W") {
  const Linear lin = small_linear();
  const Tensor x = tensor({1, 0, -1, 2, 1, 0}, {2, 3}).requires_grad_();
  lin.forward(x).backward(tensor({1, 0, 0, 2}, {2, 2}));
  CHECK(lin.weight.grad().to_vector() == std::vector<double>{1, 0, -1, 4, 2, 0});
  CHECK(lin.bias.grad().to_vector() == std::vector<double>{1, 2});
  CHECK(x.grad().to_vector() == std::vector<double>{1, 2, 3, 8, 10, 12});
}

TEST_CASE("nn: Linear applies to every leading dim and reads the weight through a transposed view") {
  Generator gen(1);
  const Linear lin(4, 3, true, gen);
  const Tensor x = randn({2, 5, 4}, gen).requires_grad_();
  Tape::current().clear();
  const Tensor y = lin.forward(x);
  CHECK(y.shape() == Shape{2, 5, 3});
  // Each row equals the 2-D product of that row.
  for (int64_t b = 0; b < 2; ++b) {
    const Tensor rows = lin.forward(select(x, 0, b));
    CHECK(max_abs_diff(select(y, 0, b), rows) < 1e-6);
  }
  // Only views, the product and the bias add are recorded: the weight is never copied.
  const std::string tape = Tape::current().dump();
  INFO(tape);
  CHECK(tape.find("matmul") != std::string::npos);
  CHECK(tape.find("copy") == std::string::npos);
  Tape::current().clear();
}

TEST_CASE("nn: Linear has PyTorch's parameter names and shapes and no bias when asked") {
  Generator gen(2);
  const Linear lin(5, 3, true, gen);
  const NamedTensors params = lin.named_parameters();
  REQUIRE(params.size() == 2);
  CHECK(params[0].first == "weight");
  CHECK(params[0].second.shape() == Shape{3, 5});
  CHECK(params[1].first == "bias");
  CHECK(params[1].second.shape() == Shape{3});
  CHECK(lin.in_features() == 5);
  CHECK(lin.out_features() == 3);

  const Linear no_bias(5, 3, false, gen);
  REQUIRE(no_bias.named_parameters().size() == 1);
  CHECK(no_bias.named_parameters()[0].first == "weight");
  CHECK_FALSE(no_bias.bias.defined());
  const Tensor x = randn({2, 5}, gen);
  CHECK(max_abs_diff(no_bias.forward(x), matmul(x, transpose(no_bias.weight, 0, 1))) == 0);
}

TEST_CASE("nn: Linear initialises weight and bias uniformly within 1/sqrt(in_features) as PyTorch does") {
  Generator gen(3);
  const Linear lin(256, 128, true, gen);
  const double bound = 1.0 / 16;  // 1/√256
  const std::vector<double> w = lin.weight.to_vector(), b = lin.bias.to_vector();
  double lo = 1, hi = -1;
  for (double v : w) lo = std::min(lo, v), hi = std::max(hi, v);
  CHECK(lo >= -bound);
  CHECK(hi < bound);
  CHECK(lo < -0.99 * bound);  // the range is used in full
  CHECK(hi > 0.99 * bound);
  CHECK(std::fabs(mean_of(w)) < 0.002);                              // 32768 draws: sd of the mean 2e-4
  CHECK(std_of(w) == Approx(bound / std::sqrt(3.0)).epsilon(0.02));  // U(-b, b) has sd b/√3
  for (double v : b) {
    CHECK(v >= -bound);
    CHECK(v < bound);
  }
  CHECK(std_of(b) == Approx(bound / std::sqrt(3.0)).epsilon(0.2));
  // The same seed gives the same layer; the weight is drawn before the bias.
  Generator again(3), other(4);
  const Linear same(256, 128, true, again), different(256, 128, true, other);
  CHECK(max_abs_diff(same.weight, lin.weight) == 0);
  CHECK(max_abs_diff(same.bias, lin.bias) == 0);
  CHECK(max_abs_diff(different.weight, lin.weight) > 0);
  Generator weight_only(3);
  const Linear no_bias(256, 128, false, weight_only);
  CHECK(max_abs_diff(no_bias.weight, lin.weight) == 0);
}

TEST_CASE("nn: Linear rejects bad sizes and inputs whose last dim is not in_features") {
  Generator gen(5);
  CHECK_THROWS_AS(Linear(0, 3, true, gen), ValueError);
  CHECK_THROWS_AS(Linear(4, -1, true, gen), ValueError);
  const Linear lin(4, 3, true, gen);
  CHECK_THROWS_MATCHES(lin.forward(zeros({2, 5})), ShapeError,
                       Catch::Matchers::Message("Linear: input [2,5] has last dim 5, expected 4"));
  CHECK_THROWS_AS(lin.forward(zeros({})), ShapeError);
  CHECK_THROWS_AS(lin.forward(zeros({2, 4}, DType::float64)), DTypeError);
}
