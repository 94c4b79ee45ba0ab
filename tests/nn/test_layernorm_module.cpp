// LayerNorm as a module: PyTorch's parameters and initial values, hand-computed outputs, leading dims,
// and errors. (The fused op itself is tested in tests/autograd.)
#include <catch2/catch.hpp>

#include "autograd/autograd.h"
#include "nn/layernorm.h"

using namespace tapegrad;
using namespace tapegrad::nn;

TEST_CASE("nn: LayerNorm starts as weight 1 and bias 0 under PyTorch's names") {
  const LayerNorm norm(4);
  const NamedTensors params = norm.named_parameters();
  REQUIRE(params.size() == 2);
  CHECK(params[0].first == "weight");
  CHECK(params[1].first == "bias");
  CHECK(norm.weight.to_vector() == std::vector<double>{1, 1, 1, 1});
  CHECK(norm.bias.to_vector() == std::vector<double>{0, 0, 0, 0});
  CHECK(norm.eps() == 1e-5);
  CHECK(norm.dim() == 4);
}

TEST_CASE("nn: LayerNorm normalises each row with the biased variance then scales and shifts") {
  LayerNorm norm(4);
  // [1, 2, 3, 4]: mean 2.5, biased variance 1.25, so (x - 2.5) / √(1.25 + 1e-5)
  const Tensor x = tensor({1, 2, 3, 4, 1, 2, 3, 4}, {2, 4}, DType::float64);
  norm.to(DType::float64);
  const Tensor y = norm.forward(x);
  const std::vector<double> expected{-1.3416354199689269, -0.447211806656309, 0.447211806656309, 1.3416354199689269};
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 4; ++c) CHECK(y.at({r, c}) == Approx(expected[c]).epsilon(1e-12));
  {
    NoGradGuard no_grad;
    norm.weight.copy_(tensor({2, 0.5, -1, 1}, DType::float64));
    norm.bias.copy_(tensor({0.1, 0.2, 0.3, -0.4}, DType::float64));
  }
  const std::vector<double> affine{-2.5832708399378537, -0.023605903328154487, -0.147211806656309, 0.9416354199689269};
  const Tensor z = norm.forward(x);
  for (int64_t c = 0; c < 4; ++c) CHECK(z.at({1, c}) == Approx(affine[c]).epsilon(1e-12));
}

TEST_CASE("nn: LayerNorm works over any leading dims and its gradients reach weight and bias") {
  LayerNorm norm(5, 1e-6);
  Generator gen(0);
  const Tensor x = randn({2, 3, 5}, gen).requires_grad_();
  const Tensor y = norm.forward(x);
  CHECK(y.shape() == Shape{2, 3, 5});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t) {
      double m = 0, v = 0;
      for (int64_t c = 0; c < 5; ++c) m += y.at({b, t, c}) / 5;
      for (int64_t c = 0; c < 5; ++c) v += (y.at({b, t, c}) - m) * (y.at({b, t, c}) - m) / 5;
      CHECK(m == Approx(0).margin(1e-6));
      CHECK(v == Approx(1).epsilon(1e-4));
    }
  y.backward(ones({2, 3, 5}));
  CHECK(norm.bias.grad().to_vector() == std::vector<double>{6, 6, 6, 6, 6});  // db = sum of dy over 6 rows
  CHECK(norm.weight.grad().defined());
  CHECK(x.grad().shape() == Shape{2, 3, 5});
}

TEST_CASE("nn: LayerNorm rejects bad sizes and a wrong last dim") {
  CHECK_THROWS_AS(LayerNorm(0), ValueError);
  CHECK_THROWS_AS(LayerNorm(4, -1e-5), ValueError);
  const LayerNorm norm(4);
  CHECK_THROWS_MATCHES(norm.forward(zeros({2, 3})), ShapeError,
                       Catch::Matchers::Message("LayerNorm: input [2,3] has last dim 3, expected 4"));
  CHECK_THROWS_AS(norm.forward(zeros({})), ShapeError);
}
