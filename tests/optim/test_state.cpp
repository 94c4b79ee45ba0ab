// Optimizer state: N steps, save (state() and a copy of the parameters), a new model and optimizer,
// load, N more steps must equal 2N straight steps bit for bit; and load_state refuses, by name, what does
// not fit. The gradient is a fixed function of the parameters and the step, and "b" gets no gradient on
// every third step, so the per-parameter update counts differ from the global one.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <memory>

#include "autograd/random.h"
#include "optim/adam.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
#include "optim_test_util.h"

using namespace tapegrad;
using namespace tapegrad::optim;
using namespace tapegrad::optim::test;

namespace {

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(NamedParameters)>;

NamedParameters make_model(DType dtype) {
  Generator gen(7);
  NamedParameters params{{"w", randn(Shape{3, 4}, gen, dtype)}, {"b", randn(Shape{4}, gen, dtype)}};
  for (auto& named : params) named.second.requires_grad_();
  return params;
}

// A fresh model holding copies of the parameters' values (what loading a checkpoint gives).
NamedParameters copy_model(const NamedParameters& params) {
  NamedParameters copy;
  for (const auto& [name, p] : params) copy.emplace_back(name, p.detach().clone().requires_grad_());
  return copy;
}

// Steps the optimizer `steps` times, its lr set from a warm-up + cosine schedule by its own step count.
void train(Optimizer& opt, const NamedParameters& params, int64_t steps) {
  const LrSchedule schedule{"cosine", 0.05, 2, 12, 0.001};
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t step = opt.step_count();
    opt.set_lr(schedule.lr_at(step));
    opt.zero_grad();
    for (const auto& [name, p] : params) {
      if (name == "b" && step % 3 == 1) continue;  // no gradient reaches b on this step
      std::vector<double> g = p.to_vector();
      for (size_t k = 0; k < g.size(); ++k) g[k] = std::sin(3 * g[k] + 0.1 * static_cast<double>(step + k));
      set_grad(p, g);
    }
    opt.step();
  }
}

void check_bit_identical(const NamedTensors& a, const NamedTensors& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(a[i].first == b[i].first);
    CHECK(a[i].second.dtype() == b[i].second.dtype());
    CHECK(a[i].second.to_vector() == b[i].second.to_vector());  // exact: every value converts to double exactly
  }
}

void check_resume(const MakeOptimizer& make, DType dtype) {
  INFO("dtype " << dtype_name(dtype));
  const int64_t n = 5;
  // 2N straight
  const NamedParameters straight = make_model(dtype);
  auto opt_straight = make(straight);
  train(*opt_straight, straight, 2 * n);

  // N, save, new model and optimizer, load, N more
  const NamedParameters first = make_model(dtype);
  auto opt_first = make(first);
  train(*opt_first, first, n);
  const NamedTensors saved_state = opt_first->state();
  const NamedParameters resumed = copy_model(first);
  auto opt_resumed = make(resumed);
  opt_resumed->load_state(saved_state);
  CHECK(opt_resumed->step_count() == n);
  train(*opt_resumed, resumed, n);

  CHECK(opt_resumed->step_count() == 2 * n);
  check_bit_identical(resumed, straight);
  check_bit_identical(opt_resumed->state(), opt_straight->state());
  // and the run did move the parameters
  CHECK(straight[0].second.to_vector() != make_model(dtype)[0].second.to_vector());
}

}  // namespace

TEST_CASE("optim: SGD with nesterov momentum resumes bit-identically") {
  for (DType dtype : {DType::float32, DType::float64})
    check_resume(
        [](NamedParameters p) {
          return std::make_unique<SGD>(std::move(p),
                                       SgdOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 1e-2});
        },
        dtype);
}

TEST_CASE("optim: SGD with dampened momentum resumes bit-identically") {
  check_resume(
      [](NamedParameters p) {
        return std::make_unique<SGD>(std::move(p), SgdOptions{.lr = 0.05, .momentum = 0.5, .dampening = 0.3});
      },
      DType::float32);
}

TEST_CASE("optim: Adam resumes bit-identically") {
  for (DType dtype : {DType::float32, DType::float64})
    check_resume(
        [](NamedParameters p) {
          return std::make_unique<Adam>(std::move(p), AdamOptions{.lr = 0.05, .weight_decay = 1e-3});
        },
        dtype);
}

TEST_CASE("optim: AdamW resumes bit-identically") {
  for (DType dtype : {DType::float32, DType::float64})
    check_resume([](NamedParameters p) { return std::make_unique<AdamW>(std::move(p), AdamWOptions{.lr = 0.05}); },
                 dtype);
}

TEST_CASE("optim: state names are stable and step counts are float64") {
  const NamedParameters params = make_model(DType::float32);
  auto names = [](const NamedTensors& state) {
    std::vector<std::string> out;
    for (const auto& entry : state) out.push_back(entry.first);
    return out;
  };
  Adam adam(params);
  CHECK(names(adam.state()) ==
        std::vector<std::string>{"step", "step.w", "step.b", "exp_avg.w", "exp_avg.b", "exp_avg_sq.w", "exp_avg_sq.b"});
  SGD plain(params, {.lr = 0.1});
  CHECK(names(plain.state()) == std::vector<std::string>{"step", "step.w", "step.b"});
  SGD momentum(params, {.lr = 0.1, .momentum = 0.9});
  CHECK(names(momentum.state()) ==
        std::vector<std::string>{"step", "step.w", "step.b", "momentum_buffer.w", "momentum_buffer.b"});

  train(adam, params, 3);  // b has no gradient on step 1
  const NamedTensors state = adam.state();
  const Tensor step = find_entry(state, "step");
  CHECK(step.dtype() == DType::float64);
  CHECK(step.shape() == Shape{1});
  CHECK(step.item() == 3);
  CHECK(find_entry(state, "step.w").item() == 3);
  CHECK(find_entry(state, "step.b").item() == 2);
  CHECK(find_entry(state, "exp_avg.w").dtype() == DType::float32);
  CHECK(find_entry(state, "exp_avg.w").shape() == Shape{3, 4});
}

TEST_CASE("optim: state() is a snapshot, not a view of the live buffers") {
  const NamedParameters params = make_model(DType::float64);
  Adam opt(params);
  train(opt, params, 2);
  const NamedTensors before = opt.state();
  const std::vector<double> m = find_entry(before, "exp_avg.w").to_vector();
  train(opt, params, 1);
  CHECK(find_entry(before, "exp_avg.w").to_vector() == m);
  CHECK(find_entry(before, "step").item() == 2);
}

TEST_CASE("optim: load_state refuses missing, unexpected and ill-fitting entries by name") {
  const NamedParameters params = make_model(DType::float32);
  Adam source(params, {.lr = 0.01});
  train(source, params, 2);
  const NamedTensors good = source.state();

  const NamedParameters target_params = copy_model(params);
  Adam target(target_params, {.lr = 0.01});
  const NamedTensors fresh = target.state();
  auto with = [&](const std::string& name, const Tensor& t) {
    NamedTensors s = good;
    for (auto& entry : s)
      if (entry.first == name) entry.second = t;
    return s;
  };
  auto without = [&](const std::string& name) {
    NamedTensors s;
    for (const auto& entry : good)
      if (entry.first != name) s.push_back(entry);
    return s;
  };

  CHECK_THROWS_AS(target.load_state(without("exp_avg_sq.b")), ValueError);
  CHECK_THROWS_WITH(target.load_state(without("exp_avg_sq.b")), Catch::Contains("1 missing ('exp_avg_sq.b' [4])"));
  CHECK_THROWS_WITH(target.load_state(without("step")), Catch::Contains("1 missing ('step' [1])"));
  CHECK_THROWS_WITH(target.load_state(without("step.w")), Catch::Contains("1 missing ('step.w' [1])"));

  NamedTensors extra = good;
  extra.emplace_back("momentum_buffer.w", zeros(Shape{3, 4}));
  CHECK_THROWS_AS(target.load_state(extra), ValueError);
  CHECK_THROWS_WITH(target.load_state(extra), Catch::Contains("1 unexpected ('momentum_buffer.w' [3,4])"));
  NamedTensors twice = good;
  twice.push_back(good[3]);
  CHECK_THROWS_WITH(target.load_state(twice), Catch::Contains("'exp_avg.w' appears twice"));

  CHECK_THROWS_AS(target.load_state(with("exp_avg.w", zeros(Shape{4, 3}))), ShapeError);
  CHECK_THROWS_WITH(target.load_state(with("exp_avg.w", zeros(Shape{4, 3}))),
                    Catch::Contains("'exp_avg.w'") && Catch::Contains("[4,3]") && Catch::Contains("[3,4]"));
  CHECK_THROWS_AS(target.load_state(with("exp_avg.b", zeros(Shape{4}, DType::float64))), DTypeError);
  CHECK_THROWS_AS(target.load_state(with("step", tensor({-1.0}, DType::float64))), ValueError);
  CHECK_THROWS_WITH(target.load_state(with("step.b", tensor({1.5}, DType::float64))), Catch::Contains("'step.b'"));
  CHECK_THROWS_AS(target.load_state(with("step", zeros(Shape{2}, DType::float64))), ShapeError);

  // Another optimizer's state: SGD with momentum has momentum_buffer.* where Adam has exp_avg.*.
  SGD sgd(params, {.lr = 0.1, .momentum = 0.9});
  // One message names every difference.
  CHECK_THROWS_WITH(target.load_state(sgd.state()),
                    Catch::Contains("4 missing ('exp_avg.w' [3,4], 'exp_avg.b' [4], 'exp_avg_sq.w' [3,4], "
                                    "'exp_avg_sq.b' [4]), 2 unexpected ('momentum_buffer.b' [4], "
                                    "'momentum_buffer.w' [3,4])"));

  // None of the failed loads changed anything; a good one then does.
  check_bit_identical(target.state(), fresh);
  target.load_state(good);
  check_bit_identical(target.state(), good);
}
