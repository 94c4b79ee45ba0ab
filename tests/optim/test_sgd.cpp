// SGD against torch.optim.SGD on hand-sized numbers: a 3-element parameter p0 = [1, -2, 0.5] that gets
// g1 = [0.5, -1, 2] on the first step and g2 = [-0.25, 0.75, 1.5] on the second.
// Expected values: torch 1.13 (/usr/bin/python3), float64, p.grad set by hand, two opt.step() calls;
// the plain and momentum ones are also easy to check by hand (shown beside them).
#include <catch2/catch.hpp>

#include "optim/sgd.h"
#include "optim_test_util.h"

using namespace tapegrad;
using namespace tapegrad::optim;
using namespace tapegrad::optim::test;

namespace {

const std::vector<double> p0{1.0, -2.0, 0.5}, g1{0.5, -1.0, 2.0}, g2{-0.25, 0.75, 1.5};

// Two steps of SGD(options) from p0 with g1 then g2; checks the parameter after each step.
void check_two_steps(const SgdOptions& options, DType dtype, const std::vector<double>& after1,
                     const std::vector<double>& after2) {
  INFO("dtype " << dtype_name(dtype));
  Tensor p = make_param(p0, dtype);
  SGD opt({{"p", p}}, options);
  set_grad(p, g1);
  opt.step();
  check_values(p, after1, tolerance(dtype));
  set_grad(p, g2);
  opt.step();
  check_values(p, after2, tolerance(dtype));
  CHECK(p.dtype() == dtype);
}

}  // namespace

TEST_CASE("optim: SGD plain steps match p -= lr·g") {
  // by hand: p1 = p0 − 0.1·g1 = [0.95, −1.9, 0.3]; p2 = p1 − 0.1·g2 = [0.975, −1.975, 0.15]
  for (DType dtype : {DType::float64, DType::float32})
    check_two_steps({.lr = 0.1}, dtype, {0.95, -1.9, 0.3}, {0.975, -1.9749999999999999, 0.14999999999999997});
}

TEST_CASE("optim: SGD momentum with dampening matches torch.optim.SGD") {
  // by hand: buf1 = g1, p1 = p0 − 0.1·g1; buf2 = 0.9·g1 + 0.9·g2 = [0.225, −0.225, 3.15], p2 = p1 − 0.1·buf2
  for (DType dtype : {DType::float64, DType::float32})
    check_two_steps({.lr = 0.1, .momentum = 0.9, .dampening = 0.1}, dtype, {0.95, -1.9, 0.3},
                    {0.9275, -1.8775, -0.01500000000000002});
}

TEST_CASE("optim: SGD nesterov matches torch.optim.SGD") {
  // by hand: step 1 uses g1 + 0.9·g1 = 1.9·g1, so p1 = p0 − 0.19·g1 = [0.905, −1.81, 0.12]
  for (DType dtype : {DType::float64, DType::float32})
    check_two_steps({.lr = 0.1, .momentum = 0.9, .nesterov = true}, dtype, {0.905, -1.81, 0.12},
                    {0.912, -1.8715000000000002, -0.327});
}

TEST_CASE("optim: SGD weight decay adds wd·p to the gradient") {
  // by hand: p1 = p0 − 0.1·(g1 + 0.1·p0) = [0.94, −1.88, 0.295]
  for (DType dtype : {DType::float64, DType::float32}) {
    check_two_steps({.lr = 0.1, .weight_decay = 0.1}, dtype, {0.94, -1.88, 0.295},
                    {0.9555999999999999, -1.9362, 0.14204999999999995});
    check_two_steps({.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1}, dtype, {0.94, -1.88, 0.295},
                    {0.9016, -1.8281999999999998, -0.042450000000000064});
  }
}

TEST_CASE("optim: SGD updates the model's own storage, skips parameters without a grad") {
  Tensor a = make_param(p0, DType::float32), b = make_param({3.0, 4.0}, DType::float32);
  const void* storage = a.data<float>();
  const uint64_t version = a.storage()->version;
  SGD opt({{"a", a}, {"b", b}}, {.lr = 0.5, .momentum = 0.9});
  set_grad(a, g1);
  opt.step();
  CHECK(a.data<float>() == storage);
  CHECK(a.storage()->version > version);  // counts as an in-place write
  CHECK((a.requires_grad() && a.is_leaf()));
  check_values(b, {3.0, 4.0}, 0);  // no grad: untouched
  // b's momentum buffer starts on its own first update: buf = g, exactly as if it were step 1.
  set_grad(b, {1.0, -1.0});
  a.zero_grad();
  opt.step();
  check_values(b, {2.5, 4.5}, 1e-7);
  check_values(a, {0.75, -1.5, -0.5}, 1e-7);  // untouched on step 2 (no grad): still p0 − 0.5·g1
  CHECK(opt.step_count() == 2);
}

TEST_CASE("optim: zero_grad drops every grad") {
  Tensor a = make_param(p0, DType::float64), b = make_param({1.0}, DType::float64);
  SGD opt({{"a", a}, {"b", b}}, {.lr = 0.1});
  set_grad(a, g1);
  set_grad(b, {2.0});
  opt.zero_grad();
  CHECK(!a.grad().defined());
  CHECK(!b.grad().defined());
  opt.step();  // nothing to do
  check_values(a, p0, 0);
}

TEST_CASE("optim: SGD rejects bad options and parameter lists") {
  auto params = [] { return NamedParameters{{"w", make_param(p0, DType::float32)}}; };
  CHECK_THROWS_WITH(SGD(params(), {.lr = -1}), Catch::Contains("SGD: lr must be"));
  CHECK_THROWS_AS(SGD(params(), {.lr = 0.1, .momentum = -0.5}), ValueError);
  CHECK_THROWS_WITH(SGD(params(), {.lr = 0.1, .momentum = -0.5}), Catch::Contains("momentum"));
  CHECK_THROWS_WITH(SGD(params(), {.lr = 0.1, .weight_decay = -1}), Catch::Contains("SGD: weight_decay"));
  CHECK_THROWS_WITH(SGD(params(), {.lr = 0.1, .dampening = 2}), Catch::Contains("SGD: dampening"));
  CHECK_THROWS_WITH(SGD(params(), {.lr = 0.1, .nesterov = true}), Catch::Contains("nesterov requires momentum > 0"));
  CHECK_THROWS_AS(SGD(params(), {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}), ValueError);

  Tensor w = make_param(p0, DType::float32);
  CHECK_THROWS_WITH(SGD({}, {}), Catch::Contains("empty parameter list"));
  CHECK_THROWS_WITH(SGD({{"w", w}, {"w", make_param(p0, DType::float32)}}), Catch::Contains("'w' appears twice"));
  CHECK_THROWS_WITH(SGD({{"w", w}, {"tied", w}}), Catch::Contains("are the same tensor"));
  CHECK_THROWS_AS(SGD({{"ids", ids({1, 2}, Shape{2})}}), DTypeError);

  SGD opt(params(), {.lr = 0.1});
  CHECK_THROWS_WITH(opt.set_lr(-0.1), Catch::Contains("SGD: lr"));
  opt.set_lr(0.25);
  CHECK(opt.lr() == 0.25);
}

TEST_CASE("optim: a grad of the wrong shape is refused by name, before anything moves") {
  Tensor a = make_param(p0, DType::float32), w = make_param(p0, DType::float32);
  SGD opt({{"a", a}, {"layer.w", w}}, {.lr = 0.1});
  set_grad(a, g1);
  w.impl().autograd->grad = zeros(Shape{2}, DType::float32);  // no op can produce this; planted directly
  CHECK_THROWS_AS(opt.step(), ShapeError);
  CHECK_THROWS_WITH(opt.step(), Catch::Contains("'layer.w'") && Catch::Contains("[2]"));
  check_values(a, p0, 0);  // a's update did not happen either
  CHECK(opt.step_count() == 0);
  w.impl().autograd->grad = zeros(Shape{3}, DType::float64);
  CHECK_THROWS_AS(opt.step(), DTypeError);
}
