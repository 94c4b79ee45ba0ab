// softmax, log_softmax and the explicit softmax Jacobian: against the numerical Jacobian, against the tape's
// backward applied to basis vectors, against their compositions from primitives, and at the edges (huge
// logits, fully masked rows).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "autograd/autograd.h"

using namespace tapegrad;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// softmax from primitives: exp(x - max) / sum exp(x - max) along dim.
Tensor softmax_composed(const Tensor& x, int64_t dim) {
  const Tensor e = exp(x - max(x, dim, /*keepdim=*/true));
  return e / sum(e, dim, /*keepdim=*/true);
}

/// Gradients of sum(f(x) ⊙ r) w.r.t. x, for a fresh leaf copy of x.
Tensor gradient_of(const std::function<Tensor(const Tensor&)>& f, const Tensor& x_in, const Tensor& r) {
  Tensor x = x_in.detach().clone().requires_grad_();
  backward(f(x), r);
  return x.grad();
}

bool all_finite(const Tensor& t) {
  for (double v : t.to_vector())
    if (!std::isfinite(v)) return false;
  return true;
}

}  // namespace

TEST_CASE("softmax: softmax_jacobian equals the numerical Jacobian of softmax, and its rows sum to 0") {
  Generator gen(1);
  const Tensor x = randn({6}, gen, DType::float64);
  const Tensor p = softmax(x);
  const Tensor jacobian = softmax_jacobian(p);
  REQUIRE(jacobian.shape() == Shape{6, 6});
  CHECK(jacobian.dtype() == DType::float64);
  CHECK_FALSE(jacobian.requires_grad());
  const Tensor numeric = numerical_jacobian([](const Tensor& t) { return softmax(t); }, x);
  CHECK(max_abs_diff(jacobian, numeric) < 1e-9);
  for (int64_t i = 0; i < 6; ++i) {
    double row = 0;
    for (int64_t k = 0; k < 6; ++k) {
      row += jacobian.at({i, k});
      CHECK(jacobian.at({i, k}) == jacobian.at({k, i}));  // symmetric
    }
    CHECK(std::fabs(row) < 1e-15);
    CHECK(jacobian.at({i, i}) == Approx(p.at({i}) * (1 - p.at({i}))).epsilon(1e-14));
  }
}

TEST_CASE("softmax: the explicit Jacobian equals the tape's backward applied to each basis vector") {
  Generator gen(2);
  const Tensor x0 = randn({5}, gen, DType::float64);
  const Tensor jacobian = softmax_jacobian(softmax(x0));
  for (int64_t i = 0; i < 5; ++i) {
    Tensor e_i = zeros({5}, DType::float64);
    e_i.data<double>()[i] = 1;
    // backward(y, e_i) gives Jᵀ e_i, i.e. row i of J.
    const Tensor row = gradient_of([](const Tensor& x) { return softmax(x); }, x0, e_i);
    for (int64_t k = 0; k < 5; ++k) CHECK(row.at({k}) == Approx(jacobian.at({i, k})).margin(1e-15));
  }
}

TEST_CASE("softmax: values and gradients equal the composition exp(x - max) / sum") {
  Generator gen(3);
  SECTION("last dim") {
    const Tensor x = randn({4, 7}, gen, DType::float64), r = randn({4, 7}, gen, DType::float64);
    CHECK(max_abs_diff(softmax(x), softmax_composed(x, -1)) < 1e-15);
    const Tensor dx = gradient_of([](const Tensor& t) { return softmax(t); }, x, r);
    const Tensor dx_ref = gradient_of([](const Tensor& t) { return softmax_composed(t, -1); }, x, r);
    CHECK(max_abs_diff(dx, dx_ref) < 1e-14);
  }
  SECTION("a middle dim, through a transposed view") {
    const Tensor x = randn({2, 5, 3}, gen, DType::float64), r = randn({3, 5, 2}, gen, DType::float64);
    auto fused = [](const Tensor& t) { return softmax(transpose(t, 0, 2), 1); };
    auto composed = [](const Tensor& t) { return softmax_composed(transpose(t, 0, 2), 1); };
    CHECK(max_abs_diff(fused(x), composed(x)) < 1e-15);
    CHECK(max_abs_diff(gradient_of(fused, x, r), gradient_of(composed, x, r)) < 1e-14);
  }
  SECTION("float32") {
    const Tensor x = randn({3, 6}, gen), r = randn({3, 6}, gen);
    CHECK(max_abs_diff(softmax(x), softmax_composed(x, -1)) < 1e-6);
    CHECK(max_abs_diff(gradient_of([](const Tensor& t) { return softmax(t); }, x, r),
                       gradient_of([](const Tensor& t) { return softmax_composed(t, -1); }, x, r)) < 1e-6);
  }
}

TEST_CASE("softmax: a non-last dim equals the last-dim softmax of the transposed tensor") {
  Generator gen(4);
  const Tensor x = randn({3, 4, 5}, gen, DType::float64);
  for (int64_t dim : {0, 1, -2}) {
    const Tensor expected = transpose(softmax(transpose(x, dim, -1)), dim, -1);
    CHECK(max_abs_diff(softmax(x, dim), expected) < 1e-15);
    CHECK(max_abs_diff(log_softmax(x, dim), transpose(log_softmax(transpose(x, dim, -1)), dim, -1)) < 1e-14);
  }
}

TEST_CASE("softmax: huge logits (±1000) stay finite and correct") {
  // softmax is shift-invariant: [1000, 999, 998] and [-1000, -1001, -1002] both give [1, e^-1, e^-2] / Z.
  const double z = 1 + std::exp(-1.0) + std::exp(-2.0);
  const std::vector<double> expected = {1 / z, std::exp(-1.0) / z, std::exp(-2.0) / z};
  for (DType dtype : {DType::float64, DType::float32}) {
    const Tensor x = tensor({1000, 999, 998, -1000, -1001, -1002}, {2, 3}, dtype).requires_grad_();
    const Tensor y = softmax(x);
    REQUIRE(all_finite(y));
    for (int64_t row = 0; row < 2; ++row)
      for (int64_t k = 0; k < 3; ++k) CHECK(y.at({row, k}) == Approx(expected[k]).epsilon(1e-6));
    backward(y, tensor({1, -2, 0.5, 0.25, 3, -1}, {2, 3}, dtype));
    CHECK(all_finite(x.grad()));

    const Tensor wide = tensor({1000, -1000, 0}, {3}, dtype);
    CHECK(softmax(wide).to_vector() == std::vector<double>{1, 0, 0});
    const Tensor log_y = log_softmax(wide);
    CHECK(log_y.at({0}) == 0);
    CHECK(log_y.at({1}) == -2000);
    CHECK(log_y.at({2}) == -1000);
  }
}

TEST_CASE("softmax: a fully -inf row gives zeros and a zero gradient, a partly masked row ignores its -inf") {
  for (DType dtype : {DType::float64, DType::float32}) {
    const Tensor x = tensor({-kInf, -kInf, -kInf, 0.5, -kInf, 1.5}, {2, 3}, dtype).requires_grad_();
    const Tensor y = softmax(x);
    for (int64_t k = 0; k < 3; ++k) CHECK(y.at({0, k}) == 0);
    CHECK(y.at({1, 0}) == Approx(1 / (1 + std::exp(1.0))).epsilon(1e-6));
    CHECK(y.at({1, 1}) == 0);
    CHECK(y.at({1, 2}) == Approx(1 / (1 + std::exp(-1.0))).epsilon(1e-6));
    backward(y, tensor({1, 2, 3, 4, 5, 6}, {2, 3}, dtype));
    const Tensor dx = x.grad();
    REQUIRE(all_finite(dx));
    CHECK(dx.at({0, 0}) == 0);
    CHECK(dx.at({0, 1}) == 0);
    CHECK(dx.at({0, 2}) == 0);
    CHECK(dx.at({1, 1}) == 0);  // y = 0 there, and dx = y ⊙ (...)
  }
  SECTION("log_softmax: the masked row is -inf (log 0) with zero gradient") {
    const Tensor x = tensor({-kInf, -kInf, 0.0, 1.0}, {2, 2}, DType::float64).requires_grad_();
    const Tensor y = log_softmax(x);
    CHECK(y.at({0, 0}) == -kInf);
    CHECK(y.at({0, 1}) == -kInf);
    CHECK(y.at({1, 1}) == Approx(-std::log1p(std::exp(-1.0))));
    backward(y, tensor({1, 2, 3, 4}, {2, 2}, DType::float64));
    CHECK(x.grad().at({0, 0}) == 0);
    CHECK(x.grad().at({0, 1}) == 0);
    CHECK(all_finite(x.grad()));
  }
  SECTION("a fully masked column along dim 0") {
    const Tensor x = tensor({-kInf, 1.0, -kInf, 1.0}, {2, 2}, DType::float64);
    CHECK(softmax(x, 0).to_vector() == std::vector<double>{0, 0.5, 0, 0.5});
  }
}

TEST_CASE("softmax: log_softmax equals log(softmax(x)) where that is finite, and stays finite where it is not") {
  Generator gen(5);
  const Tensor x = randn({3, 6}, gen, DType::float64), r = randn({3, 6}, gen, DType::float64);
  CHECK(max_abs_diff(log_softmax(x), log(softmax(x))) < 1e-14);
  CHECK(max_abs_diff(log_softmax(x), log(softmax_composed(x, -1))) < 1e-14);
  const Tensor dx = gradient_of([](const Tensor& t) { return log_softmax(t); }, x, r);
  CHECK(max_abs_diff(dx, gradient_of([](const Tensor& t) { return log(softmax(t)); }, x, r)) < 1e-14);
  CHECK(max_abs_diff(dx, gradient_of([](const Tensor& t) { return log(softmax_composed(t, -1)); }, x, r)) < 1e-14);
  // exp(-800) underflows to 0 in float64, so the composition gives log 0 = -inf; log_softmax does not.
  const Tensor far = tensor({0, -800}, {2}, DType::float64);
  CHECK(log(softmax(far)).at({1}) == -kInf);
  CHECK(log_softmax(far).at({1}) == -800);
}

TEST_CASE("softmax: errors name the op and the shape") {
  CHECK_THROWS_AS(softmax(ids({1, 2, 3}, {3})), DTypeError);
  CHECK_THROWS_WITH(softmax(zeros({2, 3}), 2),
                    Catch::Matchers::Contains("softmax") && Catch::Matchers::Contains("[2,3]"));
  CHECK_THROWS_AS(log_softmax(zeros({2, 3}), -3), ShapeError);
  CHECK_THROWS_AS(softmax_jacobian(zeros({2, 3})), ShapeError);
  CHECK_THROWS_WITH(softmax_jacobian(zeros({2, 3})), Catch::Matchers::Contains("softmax_jacobian"));
}
