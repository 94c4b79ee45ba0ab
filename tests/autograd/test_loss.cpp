// cross_entropy: against its composition (-mean of log_softmax gathered at the targets through a one-hot),
// a value computed by hand, huge logits, ignore_index, and bad targets.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/autograd.h"

using namespace tapegrad;

namespace {

/// One-hot rows of the targets, built with ops: row r is row t_r of the identity (a slice), and an ignored
/// row is a row of zeros. Not differentiated (a constant).
Tensor one_hot(const std::vector<int64_t>& targets, int64_t classes, int64_t ignore_index, DType dtype) {
  std::vector<double> identity(static_cast<size_t>(classes * classes), 0.0);
  for (int64_t c = 0; c < classes; ++c) identity[c * classes + c] = 1;
  const Tensor eye = tensor(identity, {classes, classes}, dtype);
  const Tensor none = zeros({1, classes}, dtype);
  std::vector<Tensor> rows;
  for (int64_t t : targets) rows.push_back(t == ignore_index ? none : slice(eye, 0, t, t + 1));
  return concat(rows, 0);
}

/// -mean over the valid rows of log_softmax(logits)[r, t_r], composed from log_softmax, mul, sum and div.
Tensor cross_entropy_composed(const Tensor& logits, const std::vector<int64_t>& targets, int64_t ignore_index = -100) {
  const Tensor onehot = one_hot(targets, logits.size(1), ignore_index, logits.dtype());
  const Tensor picked = sum(log_softmax(logits) * onehot, 1);  // (N): log p[r, t_r], 0 for ignored rows
  const double valid = sum(onehot).item();
  return -sum(picked) / valid;
}

bool all_finite(const Tensor& t) {
  for (double v : t.to_vector())
    if (!std::isfinite(v)) return false;
  return true;
}

}  // namespace

TEST_CASE("loss: cross_entropy equals -mean(log_softmax gathered at the targets), values and gradients") {
  Generator gen(11);
  const std::vector<int64_t> t = {3, 0, 4, 4, 1, 2};
  for (DType dtype : {DType::float64, DType::float32}) {
    const double tol = dtype == DType::float64 ? 1e-14 : 1e-6;
    const Tensor x0 = randn({6, 5}, gen, dtype);
    Tensor x = x0.clone().requires_grad_(), x_ref = x0.clone().requires_grad_();
    const Tensor loss = cross_entropy(x, ids(t, {6}));
    REQUIRE(loss.shape() == Shape{});
    CHECK(loss.dtype() == dtype);
    loss.backward();  // releases the tape, so the reference is recorded after it
    const Tensor loss_ref = cross_entropy_composed(x_ref, t);
    CHECK(loss.item() == Approx(loss_ref.item()).epsilon(tol));
    loss_ref.backward();
    CHECK(max_abs_diff(x.grad(), x_ref.grad()) < tol);
  }
}

TEST_CASE("loss: cross_entropy of a small example computed by hand") {
  // Row 0: logits (1, 2, 3), target 2: loss = log(e + e² + e³) - 3 = log(1 + e⁻¹ + e⁻²) = 0.4076059644...
  // Row 1: logits (1, 1, 1), target 0: loss = log 3 = 1.0986122886...     mean: 0.7531091265...
  Tensor x = tensor({1, 2, 3, 1, 1, 1}, {2, 3}, DType::float64).requires_grad_();
  const Tensor loss = cross_entropy(x, ids({2, 0}, {2}));
  CHECK(loss.item() == Approx(0.7531091265562451).epsilon(1e-15));
  loss.backward();
  // dlogits = (softmax - onehot) / N: softmax row 0 = (0.0900..., 0.2447..., 0.6652...), row 1 = 1/3 each.
  const std::vector<double> expected = {0.09003057317038046 / 2,
                                        0.24472847105479764 / 2,
                                        (0.6652409557748218 - 1) / 2,
                                        (1.0 / 3 - 1) / 2,
                                        1.0 / 6,
                                        1.0 / 6};
  const std::vector<double> dx = x.grad().to_vector();
  for (size_t i = 0; i < expected.size(); ++i) CHECK(dx[i] == Approx(expected[i]).epsilon(1e-14));
}

TEST_CASE("loss: cross_entropy with logits of ±1000 stays finite") {
  for (DType dtype : {DType::float64, DType::float32}) {
    Tensor x = tensor({1000, -1000, 0, -1000, 1000, 0}, {2, 3}, dtype).requires_grad_();
    // Row 0 targets its largest logit (loss e⁻¹⁰⁰⁰ ≈ 0); row 1 its smallest (loss 2000). Mean 1000.
    const Tensor loss = cross_entropy(x, ids({0, 0}, {2}));
    CHECK(loss.item() == 1000);
    loss.backward();
    REQUIRE(all_finite(x.grad()));
    CHECK(x.grad().to_vector() == std::vector<double>{0, 0, 0, -0.5, 0.5, 0});
  }
}

TEST_CASE("loss: rows with ignore_index count neither in the mean nor in the gradient") {
  Generator gen(12);
  const Tensor x0 = randn({4, 3}, gen, DType::float64);
  SECTION("the default ignore_index -100") {
    Tensor x = x0.clone().requires_grad_();
    const Tensor loss = cross_entropy(x, ids({1, -100, 2, -100}, {4}));
    // The same as the loss over rows 0 and 2 alone.
    const Tensor kept = concat({slice(x0, 0, 0, 1), slice(x0, 0, 2, 3)}, 0);
    CHECK(loss.item() == Approx(cross_entropy(kept, ids({1, 2}, {2})).item()).epsilon(1e-15));
    CHECK(loss.item() == Approx(cross_entropy_composed(x0, {1, -100, 2, -100}).item()).epsilon(1e-15));
    loss.backward();
    for (int64_t c = 0; c < 3; ++c) {
      CHECK(x.grad().at({1, c}) == 0);
      CHECK(x.grad().at({3, c}) == 0);
    }
    Tensor x_ref = x0.clone().requires_grad_();
    cross_entropy_composed(x_ref, {1, -100, 2, -100}).backward();
    CHECK(max_abs_diff(x.grad(), x_ref.grad()) < 1e-15);
  }
  SECTION("a custom ignore_index that is also a class id") {
    const Tensor loss = cross_entropy(x0, ids({0, 2, 1, 0}, {4}), /*ignore_index=*/0);
    CHECK(loss.item() == Approx(cross_entropy_composed(x0, {0, 2, 1, 0}, 0).item()).epsilon(1e-15));
  }
  SECTION("every row ignored: the loss is 0 and the gradient 0 (PyTorch gives nan)") {
    Tensor x = x0.clone().requires_grad_();
    const Tensor loss = cross_entropy(x, ids({-100, -100, -100, -100}, {4}));
    CHECK(loss.item() == 0);
    loss.backward();
    const Tensor dx = x.grad();
    if (dx.defined())
      for (double v : dx.to_vector()) CHECK(v == 0);
  }
}

TEST_CASE("loss: targets outside 0..C-1 throw a ValueError naming the op, the row, the target and C") {
  const Tensor x = zeros({3, 5});
  CHECK_THROWS_AS(cross_entropy(x, ids({0, 5, 1}, {3})), ValueError);
  CHECK_THROWS_WITH(cross_entropy(x, ids({0, 5, 1}, {3})),
                    Catch::Matchers::Contains("cross_entropy") && Catch::Matchers::Contains("row 1") &&
                        Catch::Matchers::Contains("target 5") && Catch::Matchers::Contains("C = 5"));
  CHECK_THROWS_WITH(cross_entropy(x, ids({0, 1, -1}, {3})),
                    Catch::Matchers::Contains("row 2") && Catch::Matchers::Contains("target -1"));
  CHECK_THROWS_AS(cross_entropy(x, ids({0, 1, -100}, {3}), /*ignore_index=*/-1), ValueError);
  // Shapes and dtypes.
  CHECK_THROWS_AS(cross_entropy(x, ids({0, 1}, {2})), ShapeError);
  CHECK_THROWS_AS(cross_entropy(zeros({2, 3, 5}), ids({0, 1}, {2})), ShapeError);
  CHECK_THROWS_AS(cross_entropy(x, zeros({3})), DTypeError);
  CHECK_THROWS_AS(cross_entropy(ids({0, 1, 2}, {1, 3}), ids({0}, {1})), DTypeError);
  CHECK_THROWS_WITH(cross_entropy(x, ids({0, 1}, {2})),
                    Catch::Matchers::Contains("[2]") && Catch::Matchers::Contains("[3,5]"));
}
