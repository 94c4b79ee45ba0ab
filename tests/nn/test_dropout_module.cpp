// Dropout as a module: training vs evaluation, the 1/(1-p) scaling, the shared generator stream (whose
// state a trainer saves and restores), and argument errors.
#include <catch2/catch.hpp>
#include <memory>

#include "autograd/autograd.h"
#include "nn/dropout.h"

using namespace tapegrad;
using namespace tapegrad::nn;

TEST_CASE("nn: Dropout is the identity in evaluation and when p is 0") {
  auto rng = std::make_shared<Generator>(0);
  Dropout drop(0.5, rng);
  CHECK(drop.parameter_count() == 0);
  Generator gen(1);
  const Tensor x = randn({4, 5}, gen);
  drop.eval();
  const Generator::State before = rng->state();
  CHECK(drop.forward(x).same(x));
  CHECK(rng->state().words == before.words);  // nothing drawn
  const Dropout off(0.0, nullptr);            // no generator needed
  CHECK(off.is_training());
  CHECK(off.forward(x).same(x));
}

TEST_CASE("nn: Dropout in training zeroes about p of the elements and scales the rest by 1/(1-p)") {
  auto rng = std::make_shared<Generator>(2);
  const Dropout drop(0.25, rng);
  const Tensor x = full({100, 100}, 3.0);
  const std::vector<double> y = drop.forward(x).to_vector();
  int64_t dropped = 0;
  for (double v : y) {
    if (v == 0)
      ++dropped;
    else
      CHECK(v == Approx(4.0));  // 3 / 0.75
  }
  CHECK(dropped / 10000.0 == Approx(0.25).margin(0.015));  // sd of the fraction 0.0043
}

TEST_CASE("nn: Dropout's gradient is the mask times 1/(1-p)") {
  auto rng = std::make_shared<Generator>(3);
  const Dropout drop(0.5, rng);
  Generator gen(4);
  const Tensor x = randn({3, 4}, gen).requires_grad_();
  const Tensor y = drop.forward(x);
  y.backward(ones({3, 4}));
  const std::vector<double> out = y.to_vector(), dx = x.grad().to_vector();
  for (size_t i = 0; i < out.size(); ++i) CHECK(dx[i] == (out[i] == 0 ? 0.0 : 2.0));
}

TEST_CASE("nn: Dropouts share one stream and restoring its state reproduces the masks") {
  auto rng = std::make_shared<Generator>(5);
  const Dropout first(0.5, rng), second(0.5, rng);
  const Tensor x = ones({8, 8});
  const Generator::State saved = rng->state();
  const Tensor a = first.forward(x), b = second.forward(x);
  CHECK(max_abs_diff(a, b) > 0);  // the second continues the stream, it does not repeat it
  rng->set_state(saved);
  CHECK(max_abs_diff(first.forward(x), a) == 0);
  CHECK(max_abs_diff(second.forward(x), b) == 0);
  CHECK(first.rng() == second.rng());
}

TEST_CASE("nn: Dropout rejects p outside 0 to 1 and a missing generator") {
  auto rng = std::make_shared<Generator>(6);
  CHECK_THROWS_AS(Dropout(1.0, rng), ValueError);
  CHECK_THROWS_AS(Dropout(-0.1, rng), ValueError);
  CHECK_THROWS_AS(Dropout(std::nan(""), rng), ValueError);
  CHECK_THROWS_AS(Dropout(0.1, nullptr), ValueError);
  CHECK_THROWS_WITH(Dropout(0.1, nullptr), Catch::Matchers::Contains("null rng"));
  CHECK(Dropout(0.1, rng).p() == 0.1);
}
