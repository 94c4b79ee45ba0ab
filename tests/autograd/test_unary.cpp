// elu at the values that pin it down: the identity for x > 0, α(e^x - 1) below, continuity at 0, and the
// slope read from the output (y + α) matching α e^x.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/autograd.h"

using namespace tapegrad;

TEST_CASE("elu: x above 0, alpha (e^x - 1) below, and the slope alpha e^x below 0") {
  const Tensor x = tensor({-3.0, -1e-9, 0.0, 0.5, 2.0}, {5}, DType::float64).requires_grad_();
  for (double alpha : {1.0, 0.5}) {
    const Tensor y = elu(x, alpha);
    CHECK(y.at({0}) == Approx(alpha * (std::exp(-3.0) - 1)).epsilon(1e-15));
    // expm1 keeps the digits near 0⁻ that exp(x) - 1 would cancel away (it is off there by ~1e-8 relative):
    // the Taylor series x + x²/2 to 1e-15.
    CHECK(y.at({1}) == Approx(alpha * (-1e-9 + 0.5e-18)).epsilon(1e-15));
    CHECK(y.at({2}) == 0.0);
    CHECK(y.at({3}) == 0.5);
    CHECK(y.at({4}) == 2.0);
    x.zero_grad();
    sum(y * tensor({1.0, 2.0, 3.0, 4.0, 5.0}, {5}, DType::float64)).backward();
    const Tensor dx = x.grad();
    CHECK(dx.at({0}) == Approx(1.0 * alpha * std::exp(-3.0)).epsilon(1e-14));
    CHECK(dx.at({1}) == Approx(2.0 * alpha).epsilon(1e-8));
    CHECK(dx.at({2}) == Approx(3.0 * alpha));  // at 0 the left slope α (x > 0 is false)
    CHECK(dx.at({3}) == 4.0);
    CHECK(dx.at({4}) == 5.0);
  }
}
