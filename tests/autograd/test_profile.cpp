// The op profile (autograd/profile.h): what `tapegrad bench --profile` prints is booked to the right ops.
#include <catch2/catch.hpp>

#include <thread>

#include "autograd/autograd.h"
#include "autograd/profile.h"

using namespace tapegrad;

namespace {

const OpTimes* find_row(const std::vector<OpTimes>& rows, const std::string& name) {
  for (const OpTimes& row : rows)
    if (row.name == name) return &row;
  return nullptr;
}

}  // namespace

TEST_CASE("profile: each recorded op and backward rule is booked to its op, with its products' FLOPs") {
  Generator gen(3);
  const Tensor x = randn({2, 5, 4}, gen).requires_grad_(), w = randn({3, 4}, gen).requires_grad_(),
               b = randn({3}, gen).requires_grad_(), m = randn({3, 6}, gen).requires_grad_();
  start_profile();
  REQUIRE(profiling());
  const Tensor y = matmul(linear(x, w, b), m);  // (2, 5, 3) @ (3, 6)
  {
    ProfileScope phase("a phase");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  backward(sum(y));
  const std::vector<OpTimes> rows = stop_profile();
  REQUIRE_FALSE(profiling());

  const OpTimes *lin = find_row(rows, "matmul_bias"), *mm = find_row(rows, "matmul"), *total = find_row(rows, "sum");
  const OpTimes* phase = find_row(rows, "a phase");
  REQUIRE(lin);
  REQUIRE(mm);
  REQUIRE(total);
  REQUIRE(phase);
  CHECK(lin->calls == 1);
  CHECK(mm->calls == 1);
  // forward 2·M·N·K over the 10 rows, and backward twice that (two products of the same size)
  CHECK(lin->flops == 3 * 2.0 * 10 * 3 * 4);
  CHECK(mm->flops == 3 * 2.0 * 10 * 6 * 3);
  CHECK(total->flops == 0);
  CHECK(lin->backward_seconds > 0);
  CHECK(mm->backward_seconds > 0);
  CHECK(phase->calls == 1);
  CHECK(phase->forward_seconds >= 0.002);  // its sleep (a lower bound: a loaded machine only adds)
  CHECK(stop_profile().empty());  // nothing booked once stopped
}

TEST_CASE("profile: off, nothing is booked, and a restart starts an empty table") {
  Generator gen(4);
  const Tensor x = randn({3, 3}, gen).requires_grad_();
  backward(sum(mul(x, x)));
  start_profile();
  CHECK(stop_profile().empty());
  start_profile();
  backward(sum(mul(x, x)));
  const std::vector<OpTimes> rows = stop_profile();
  REQUIRE(find_row(rows, "mul"));
  CHECK(find_row(rows, "mul")->calls == 1);
}
