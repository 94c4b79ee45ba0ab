// FeedForward (linear1 -> activation -> dropout -> linear2) and the activations: names and shapes as in
// PyTorch's TransformerEncoderLayer, hand-computed outputs, dropout only in training, and errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>

#include "autograd/autograd.h"
#include "nn/activation.h"
#include "nn/feed_forward.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {
/// d_model 2, d_ff 3, with W1 = [[1, 0], [0, 1], [1, 1]], b1 = [0, -1, -4], W2 = [[1, 2, 3], [0, 1, -1]],
/// b2 = [0.5, 0].
FeedForward small_ff(const std::string& activation) {
  Generator gen(0);
  FeedForward ff({.d_model = 2, .d_ff = 3, .activation = activation}, gen, nullptr);
  NoGradGuard no_grad;
  ff.linear1().weight.copy_(tensor({1, 0, 0, 1, 1, 1}, {3, 2}));
  ff.linear1().bias.copy_(tensor({0, -1, -4}));
  ff.linear2().weight.copy_(tensor({1, 2, 3, 0, 1, -1}, {2, 3}));
  ff.linear2().bias.copy_(tensor({0.5, 0}));
  return ff;
}
}  // namespace

TEST_CASE("nn: FeedForward has PyTorch's child and parameter names and shapes") {
  Generator gen(1);
  const FeedForward ff({.d_model = 8, .d_ff = 32}, gen, nullptr);
  REQUIRE(ff.children().size() == 3);
  CHECK(ff.children()[0].first == "linear1");
  CHECK(ff.children()[1].first == "dropout");
  CHECK(ff.children()[2].first == "linear2");
  const NamedTensors params = ff.named_parameters();
  REQUIRE(params.size() == 4);
  CHECK(params[0].first == "linear1.weight");
  CHECK(params[0].second.shape() == Shape{32, 8});
  CHECK(params[1].first == "linear1.bias");
  CHECK(params[1].second.shape() == Shape{32});
  CHECK(params[2].first == "linear2.weight");
  CHECK(params[2].second.shape() == Shape{8, 32});
  CHECK(params[3].first == "linear2.bias");
  CHECK(params[3].second.shape() == Shape{8});
  CHECK(ff.parameter_count() == 2 * 8 * 32 + 32 + 8);
  // Each Linear keeps PyTorch's default bound 1/√in_features.
  for (double v : ff.linear2().weight.to_vector()) CHECK(std::abs(v) <= 1.0 / std::sqrt(32.0));
}

TEST_CASE("nn: FeedForward computes linear2(act(linear1(x))) by hand") {
  // x = [1, 2]: h = [1, 1, -1];  x = [-1, 3]: h = [-1, 2, -2]
  const Tensor x = tensor({1, 2, -1, 3}, {2, 2});
  // relu: [1, 1, 0] -> [1 + 2 + 0.5, 1] = [3.5, 1];  [0, 2, 0] -> [4.5, 2]
  CHECK(small_ff("relu").forward(x).to_vector() == std::vector<double>{3.5, 1, 4.5, 2});
  // gelu: g(1) = 0.8413447460685429, g(-1) = -0.15865525393145707 for x = [1, 2]:
  // [g(1) + 2 g(1) + 3 g(-1) + 0.5, g(1) - g(-1)] = [3 (g(1) + g(-1)) + 0.5, 1]
  const Tensor y = small_ff("gelu").forward(x);
  CHECK(y.at({0, 0}) == Approx(3 * (0.8413447460685429 - 0.15865525393145707) + 0.5).epsilon(1e-6));
  CHECK(y.at({0, 1}) == Approx(1.0).epsilon(1e-6));
}

TEST_CASE("nn: FeedForward equals its composition over leading dims in both activations") {
  for (std::string activation : {"relu", "gelu"}) {
    INFO(activation);
    Generator gen(2);
    const FeedForward ff({.d_model = 4, .d_ff = 6, .activation = activation}, gen, nullptr);
    const Tensor x = randn({2, 3, 4}, gen);
    const Tensor y = ff.forward(x);
    CHECK(y.shape() == Shape{2, 3, 4});
    const Tensor expected = ff.linear2().forward(activate(ff.linear1().forward(x), activation));
    CHECK(max_abs_diff(y, expected) == 0);
  }
}

TEST_CASE("nn: FeedForward applies dropout in training only and from the shared stream") {
  auto rng = std::make_shared<Generator>(3);
  Generator gen(4);
  FeedForward ff({.d_model = 4, .d_ff = 16, .dropout = 0.5}, gen, rng);
  CHECK(ff.dropout().p() == 0.5);
  CHECK(ff.dropout().rng() == rng);
  const Tensor x = randn({3, 4}, gen);
  ff.eval();
  const Tensor eval_out = ff.forward(x);
  CHECK(max_abs_diff(eval_out, ff.linear2().forward(relu(ff.linear1().forward(x)))) == 0);
  ff.train();
  const Generator::State saved = rng->state();
  const Tensor a = ff.forward(x);
  CHECK(max_abs_diff(a, eval_out) > 0);
  rng->set_state(saved);
  CHECK(max_abs_diff(ff.forward(x), a) == 0);
}

TEST_CASE("nn: FeedForward rejects bad options and inputs") {
  Generator gen(5);
  CHECK_THROWS_AS(FeedForward({.d_model = 0, .d_ff = 4}, gen, nullptr), ValueError);
  CHECK_THROWS_AS(FeedForward({.d_model = 4, .d_ff = -1}, gen, nullptr), ValueError);
  CHECK_THROWS_AS(FeedForward({.d_model = 4, .d_ff = 8, .dropout = 1.0}, gen, std::make_shared<Generator>()),
                  ValueError);
  CHECK_THROWS_AS(FeedForward({.d_model = 4, .d_ff = 8, .dropout = 0.1}, gen, nullptr), ValueError);
  const FeedForward ff({.d_model = 4, .d_ff = 8}, gen, nullptr);
  CHECK_THROWS_MATCHES(ff.forward(zeros({2, 5})), ShapeError,
                       Catch::Matchers::Message("Linear: input [2,5] has last dim 5, expected 4"));
}

TEST_CASE("nn: activations by name and as modules") {
  CHECK(component_names<ActivationKind>() == std::vector<std::string>{"relu", "gelu"});
  CHECK_THROWS_AS(component<ActivationKind>("swish"), ValueError);
  CHECK_THROWS_WITH(activate(tensor({1.0}), "swish"),
                    Catch::Matchers::Equals("unknown activation 'swish' (registered: relu or gelu)"));
  const Tensor x = tensor({-1, 0.5, 1}, DType::float64);
  CHECK(activate(x, "relu").to_vector() == std::vector<double>{0, 0.5, 1});
  const std::vector<double> g = activate(x, "gelu").to_vector();
  CHECK(g[0] == Approx(-0.15865525393145707).epsilon(1e-12));  // x Φ(x), erf form
  CHECK(g[1] == Approx(0.34573123063700656).epsilon(1e-12));
  CHECK(g[2] == Approx(0.8413447460685429).epsilon(1e-12));
  CHECK(ReLU().forward(x).to_vector() == std::vector<double>{0, 0.5, 1});
  CHECK(ReLU().parameter_count() == 0);
  CHECK(max_abs_diff(GELU().forward(x), activate(x, "gelu")) == 0);
  const GELU approx(GeluApproximation::tanh);
  CHECK(approx.forward(x).at({2}) == Approx(0.8411919906082768).epsilon(1e-12));  // tanh approximation
  CHECK(approx.forward(x).at({0}) == Approx(-0.15880800939172324).epsilon(1e-12));
}
