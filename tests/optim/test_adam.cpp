// Adam and AdamW against torch.optim.Adam / AdamW on hand-sized numbers: p0 = [1, -2, 0.5] gets
// g1 = [0.5, -1, 2] on the first step and g2 = [-0.25, 0.75, 1.5] on the second, lr = 0.1.
// Expected values: torch 1.13 (/usr/bin/python3), float64, p.grad set by hand, two opt.step() calls.
// The first step can be checked by hand: m̂ = g and v̂ = g², so p1 = p0 − lr·g/(|g| + eps), which is
// p0 − 0.1·sign(g)·(1 − eps/|g|) to first order: 1 − 0.1·(1 − 2e-8) = 0.900000002.
#include <catch2/catch.hpp>

#include "optim/adam.h"
#include "optim_test_util.h"

using namespace tapegrad;
using namespace tapegrad::optim;
using namespace tapegrad::optim::test;

namespace {

const std::vector<double> p0{1.0, -2.0, 0.5}, g1{0.5, -1.0, 2.0}, g2{-0.25, 0.75, 1.5};

// Two steps of Opt(options) from p0 with g1 then g2; checks the parameter after each step.
template <class Opt, class Options>
void check_two_steps(const Options& options, DType dtype, const std::vector<double>& after1,
                     const std::vector<double>& after2) {
  INFO("dtype " << dtype_name(dtype));
  Tensor p = make_param(p0, dtype);
  Opt opt({{"p", p}}, options);
  set_grad(p, g1);
  opt.step();
  check_values(p, after1, tolerance(dtype));
  set_grad(p, g2);
  opt.step();
  check_values(p, after2, tolerance(dtype));
}

}  // namespace

TEST_CASE("optim: Adam steps match torch.optim.Adam, bias correction included") {
  for (DType dtype : {DType::float64, DType::float32})
    check_two_steps<Adam>(AdamOptions{.lr = 0.1}, dtype, {0.900000002, -1.900000001, 0.4000000005},
                          {0.8733662987078463, -1.8910675003605355, 0.3017424929100241});
}

TEST_CASE("optim: Adam weight decay is an L2 term in the gradient") {
  // by hand, step 1: g = g1 + 0.1·p0 = [0.6, −1.2, 2.05], p1 = p0 − 0.1·g/(|g| + 1e-8)
  for (DType dtype : {DType::float64, DType::float32})
    check_two_steps<Adam>(AdamOptions{.lr = 0.1, .weight_decay = 0.1}, dtype,
                          {0.9000000016666666, -1.9000000008333333, 0.4000000004878049},
                          {0.8544413674617625, -1.870767278976266, 0.3017274630771566});
}

TEST_CASE("optim: AdamW decays the parameter before the Adam update") {
  // by hand, step 1: p0·(1 − 0.1·0.1) = [0.99, −1.98, 0.495], then the Adam step of −0.1·sign(g1)
  for (DType dtype : {DType::float64, DType::float32}) {
    check_two_steps<AdamW>(AdamWOptions{.lr = 0.1, .weight_decay = 0.1}, dtype,
                           {0.890000002, -1.880000001, 0.3950000005},
                           {0.8544662986878463, -1.8522675003505356, 0.29279249290502407});
    // torch.optim.AdamW's default weight decay is 0.01, and so is ours
    check_two_steps<AdamW>(AdamWOptions{.lr = 0.1}, dtype, {0.899000002, -1.898000001, 0.3995000005},
                           {0.8714672987058463, -1.8871695003595355, 0.3008429929095241});
  }
}

TEST_CASE("optim: Adam bias correction counts each parameter's own updates") {
  // torch: a gets g1 then g2; b gets no grad on step 1 and [0.2, 0.4] on step 2, so its state["step"] is 1
  // there and its update is a first step: b − 0.1·sign(g)·(1 − 1e-8/|g|).
  Tensor a = make_param(p0, DType::float64), b = make_param({0.3, -0.7}, DType::float64);
  Adam opt({{"a", a}, {"b", b}}, {.lr = 0.1});
  set_grad(a, g1);
  opt.step();
  set_grad(a, g2);
  set_grad(b, {0.2, 0.4});
  opt.step();
  check_values(a, {0.8733662987078463, -1.8910675003605355, 0.3017424929100241}, 1e-14);
  check_values(b, {0.20000000499999976, -0.7999999975000001}, 1e-14);
}

TEST_CASE("optim: Adam keeps m and v as torch names them") {
  Tensor p = make_param(p0, DType::float64);
  Adam opt({{"p", p}}, {.lr = 0.1});
  set_grad(p, g1);
  opt.step();
  // m = 0.1·g1, v = 0.001·g1²
  const NamedTensors state = opt.state();
  check_values(find_entry(state, "exp_avg.p"), {0.05, -0.1, 0.2}, 1e-15);
  check_values(find_entry(state, "exp_avg_sq.p"), {0.00025, 0.001, 0.004}, 1e-15);
  check_values(find_entry(state, "step.p"), {1}, 0);
}

TEST_CASE("optim: Adam and AdamW reject bad options, naming optimizer and option") {
  auto params = [] { return NamedParameters{{"w", make_param(p0, DType::float32)}}; };
  CHECK_THROWS_WITH(Adam(params(), {.lr = -1e-3}), Catch::Contains("Adam: lr must be"));
  CHECK_THROWS_WITH(Adam(params(), {.beta1 = 1.0}), Catch::Contains("Adam: beta1 must be in [0, 1)"));
  CHECK_THROWS_WITH(Adam(params(), {.beta2 = -0.1}), Catch::Contains("Adam: beta2"));
  CHECK_THROWS_WITH(Adam(params(), {.eps = 0}), Catch::Contains("Adam: eps must be"));
  CHECK_THROWS_WITH(Adam(params(), {.weight_decay = -0.1}), Catch::Contains("Adam: weight_decay"));
  CHECK_THROWS_AS(AdamW(params(), {.beta1 = 1.5}), ValueError);
  CHECK_THROWS_WITH(AdamW(params(), {.beta1 = 1.5}), Catch::Contains("AdamW: beta1"));
  CHECK_THROWS_WITH(AdamW(params(), {.eps = -1}), Catch::Contains("AdamW: eps"));
  CHECK(AdamW(params()).options().weight_decay == 0.01);
  CHECK(AdamW(params()).decoupled_weight_decay());
  CHECK(Adam(params()).options().weight_decay == 0);
}
