// elu at the values that pin it down: the identity for x > 0, α(e^x - 1) below, continuity at 0, and the
// slope read from the output (y + α) matching α e^x.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/autograd.h"
#include "autograd/random.h"

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

// float32 exact gelu runs on autograd/kernels/gelu.h (pinned in test_kernels.cpp); float64 and strided
// inputs on std::erf. The two paths agree, forward and backward, whether the gradient buffer is written
// (x used once) or added into (x used twice), and a transposed view takes the std::erf path.
TEST_CASE("gelu: float32 through the kernel matches float64 std::erf, forward and backward, used once or twice") {
  Generator gen(11);
  const Tensor x32 = mul(randn({3, 5, 67}, gen), 2.0).detach().requires_grad_();  // 1005: no multiple of 8
  const Tensor x64 = x32.detach().to(DType::float64).requires_grad_();
  const Tensor r = randn({3, 5, 67}, gen, DType::float64);
  const Tensor r2 = randn({3, 5, 67}, gen, DType::float64);
  for (int uses : {1, 2}) {
    x32.zero_grad();
    x64.zero_grad();
    // One backward per tape: the float32 graph, then the float64 one.
    const Tensor y32 = gelu(x32);
    Tensor loss32 = sum(y32 * r.to(DType::float32));
    if (uses == 2) loss32 = loss32 + sum(gelu(x32) * r2.to(DType::float32));
    loss32.backward();
    const Tensor y64 = gelu(x64);
    Tensor loss64 = sum(y64 * r);
    if (uses == 2) loss64 = loss64 + sum(gelu(x64) * r2);
    loss64.backward();
    const Tensor dx32 = x32.grad(), dx64 = x64.grad();
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t t = 0; t < 5; ++t)
        for (int64_t f = 0; f < 67; ++f) {
          const double v = x64.at({i, t, f}), scale = 1 + v * v;
          INFO("uses " << uses << ", x = " << v);
          CHECK(std::abs(y32.at({i, t, f}) - y64.at({i, t, f})) <= 1e-6 * scale * std::abs(y64.at({i, t, f})) + 1e-12);
          const double dy = std::abs(r.at({i, t, f})) + (uses == 2 ? std::abs(r2.at({i, t, f})) : 0.0);
          CHECK(std::abs(dx32.at({i, t, f}) - dx64.at({i, t, f})) <= 1e-6 * scale * (1 + std::abs(v)) * dy + 1e-12);
        }
  }
  // A transposed view (not contiguous) goes through float std::erf: the same values within its error, 1e-6
  // absolute (½x(1 + erf) cancels in the negative tail, so not relatively).
  const Tensor xt = transpose(x32, 0, 2);
  REQUIRE(!xt.is_contiguous());
  const Tensor yt = gelu(xt), yc = gelu(xt.contiguous());
  for (int64_t f = 0; f < 67; f += 11)
    CHECK(yt.at({f, 2, 1}) == Approx(yc.at({f, 2, 1})).epsilon(1e-6).margin(1e-6));
}
