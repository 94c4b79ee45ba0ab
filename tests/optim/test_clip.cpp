// clip_grad_norm: the global L2 norm over every grad (float32 and float64 mixed), scaled by
// max_norm/(total + 1e-6) only when that is below 1, as torch.nn.utils.clip_grad_norm_.
// Numbers by hand: grads [3, 4] and [12] have total norm √(9 + 16 + 144) = 13.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "optim/clip.h"
#include "optim_test_util.h"

using namespace tapegrad;
using namespace tapegrad::optim;
using namespace tapegrad::optim::test;

TEST_CASE("optim: clip_grad_norm scales every grad to the max norm") {
  Tensor a = make_param({0, 0}, DType::float32), b = make_param({0}, DType::float64),
         c = make_param({1}, DType::float32);
  set_grad(a, {3, 4});
  set_grad(b, {12});
  const NamedParameters params{{"a", a}, {"b", b}, {"c_without_grad", c}};
  CHECK(grad_norm(params) == 13.0);
  const double total = clip_grad_norm(params, 6.5);
  CHECK(total == 13.0);
  const double coef = 6.5 / (13.0 + 1e-6);  // just under one half
  check_values(a.grad(), {3 * coef, 4 * coef}, 1e-7);
  check_values(b.grad(), {12 * coef}, 1e-15);
  CHECK(grad_norm(params) == Approx(6.5).epsilon(1e-6));
  CHECK(grad_norm(params) <= 6.5);
  CHECK(!c.grad().defined());
}

TEST_CASE("optim: clip_grad_norm leaves grads under the max norm alone") {
  Tensor a = make_param({0, 0}, DType::float32);
  set_grad(a, {3, 4});
  const NamedParameters params{{"a", a}};
  CHECK(clip_grad_norm(params, 5.0 + 1e-3) == 5.0);
  check_values(a.grad(), {3, 4}, 0);
  CHECK(clip_grad_norm(params, 100) == 5.0);
  check_values(a.grad(), {3, 4}, 0);
}

TEST_CASE("optim: clip_grad_norm returns a non-finite norm and leaves the grads alone") {
  Tensor a = make_param({0, 0}, DType::float32), b = make_param({0}, DType::float64);
  const NamedParameters params{{"a", a}, {"b", b}};
  set_grad(a, {3, 4});
  set_grad(b, {std::numeric_limits<double>::infinity()});
  CHECK(std::isinf(clip_grad_norm(params, 1.0)));
  check_values(a.grad(), {3, 4}, 0);
  set_grad(b, {std::nan("")});
  CHECK(std::isnan(clip_grad_norm(params, 1.0)));
  check_values(a.grad(), {3, 4}, 0);
}

TEST_CASE("optim: clip_grad_norm without any grad, and a bad max_norm") {
  const NamedParameters params{{"a", make_param({1, 2}, DType::float32)}};
  CHECK(clip_grad_norm(params, 1.0) == 0.0);
  CHECK_THROWS_AS(clip_grad_norm(params, 0.0), ValueError);
  CHECK_THROWS_WITH(clip_grad_norm(params, -1.0), Catch::Contains("clip_grad_norm: max_norm"));
}
