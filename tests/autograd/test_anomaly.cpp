// Anomaly detection: the first op whose forward or backward makes NaN or Inf is named, with its shapes
// and scope; nothing changes while it is off; the tape survives the error.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "support/anomaly.h"

using namespace tapegrad;
using testing::anomaly_message;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor leaf(std::vector<double> values, Shape shape, DType dtype) { return tensor(values, shape, dtype).requires_grad_(); }
}  // namespace

TEST_CASE("anomaly: forward of log of a negative number names the op, the element and the shapes") {
  for (DType dtype : {DType::float32, DType::float64}) {
    INFO(dtype_name(dtype));
    const Tensor x = leaf({1, 2, 3, 4, 5, -6, 7, 8}, {2, 4}, dtype);
    DetectAnomalyGuard detect;
    CHECK(anomaly_message([&] { log(x); }) ==
          "anomaly: forward of log produced NaN (element [1,1] of output [2,4]); inputs [2,4]");
    Tape::current().clear();
  }
}

TEST_CASE("anomaly: forward of div names 0/0 as NaN and 1/0 as Inf") {
  for (DType dtype : {DType::float32, DType::float64}) {
    INFO(dtype_name(dtype));
    const Tensor a = leaf({1, 2, 0}, {3}, dtype), b = leaf({1, 1, 0}, {3}, dtype);
    DetectAnomalyGuard detect;
    CHECK(anomaly_message([&] { div(a, b); }) ==
          "anomaly: forward of div produced NaN (element [2] of output [3]); inputs [3], [3]");
    const Tensor one = tensor({1}, {1}, dtype);
    CHECK(anomaly_message([&] { div(one, tensor({0}, {1}, dtype)); }) ==
          "anomaly: forward of div produced Inf (element [0] of output [1]); inputs [1], [1]");
    Tape::current().clear();
  }
}

TEST_CASE("anomaly: ops that record nothing are checked too (NoGradGuard, constant inputs)") {
  DetectAnomalyGuard detect;
  const Tensor constant = tensor({-1, 1}, {2});
  CHECK_THAT(anomaly_message([&] { log(constant); }), StartsWith("anomaly: forward of log produced NaN"));
  NoGradGuard no_grad;
  const Tensor x = leaf({-1, 1}, {2}, DType::float64);
  CHECK_THAT(anomaly_message([&] { sqrt(x); }), StartsWith("anomaly: forward of sqrt produced NaN (element [0]"));
  CHECK(Tape::current().size() == 0);
}

TEST_CASE("anomaly: an infinity an input brought or a mask fills is not the op's doing, a NaN always is") {
  DetectAnomalyGuard detect;
  const Tensor x = leaf({1, kInf, 3}, {3}, DType::float32);
  CHECK_NOTHROW(x * 2.0 + 1.0);                                          // Inf in, Inf out
  CHECK_NOTHROW(masked_fill(leaf({1, 2}, {2}, DType::float32), mask({0, 1}, {2}), -kInf));  // -inf masks
  CHECK_NOTHROW(softmax(tensor({-kInf, -kInf, 0, -kInf}, {2, 2}), -1));  // a fully masked row gives zeros
  // inf - inf: the NaN is new, and the note says which input already held the infinity.
  CHECK(anomaly_message([&] { x - x; }) ==
        "anomaly: forward of sub produced NaN (element [1] of output [3]); inputs [3], [3] "
        "(input 0 already holds Inf, input 1 already holds Inf)");
  // A NaN that a leaf brought is reported at the first op that reads it, which points back at that input.
  const Tensor w = leaf({0.5, kNaN, 2, 1}, {2, 2}, DType::float64);
  CHECK(anomaly_message([&] { matmul(tensor({1, 1}, {1, 2}, DType::float64), w); }) ==
        "anomaly: forward of matmul produced NaN (element [0,1] of output [1,2]); inputs [1,2], [2,2] "
        "(input 1 already holds NaN)");
  Tape::current().clear();
}

TEST_CASE("anomaly: a view of a non-finite tensor is not reported (it makes no new values)") {
  DetectAnomalyGuard detect;
  const Tensor x = leaf({kNaN, 1, 2, 3}, {2, 2}, DType::float32);
  CHECK_NOTHROW(transpose(x, 0, 1));
  CHECK_NOTHROW(reshape(x, {4}));
  CHECK_NOTHROW(expand(reshape(x, {1, 4}), {3, 4}));
  Tape::current().clear();
}

TEST_CASE("anomaly: backward of sqrt at 0 (whose forward is finite) names the op and the input") {
  for (DType dtype : {DType::float32, DType::float64}) {
    INFO(dtype_name(dtype));
    const Tensor x = leaf({4, 0, 1}, {3}, dtype);
    DetectAnomalyGuard detect;
    Tensor y;
    REQUIRE_NOTHROW(y = sqrt(x));  // sqrt(0) = 0; d sqrt(x)/dx = 1 / (2 sqrt x) is Inf there
    const Tensor loss = sum(y * 3.0);
    CHECK(anomaly_message([&] { backward(loss); }) ==
          "anomaly: backward of sqrt produced Inf in the gradient of input 0 (element [1] of shape [3])");
  }
}

TEST_CASE("anomaly: a gradient given to backward that holds NaN is named as such") {
  DetectAnomalyGuard detect;
  const Tensor x = leaf({1, 2, 3}, {3}, DType::float64);
  const Tensor y = x * 2.0;
  CHECK(anomaly_message([&] { backward(y, tensor({1, kNaN, 1}, {3})); }) ==
        "anomaly: backward: the gradient given for the output holds NaN (element [1] of shape [3])");
  Tape::current().clear();
}

TEST_CASE("anomaly: while detection is off the same computations run and give NaN and Inf") {
  REQUIRE_FALSE(detect_anomaly());
  const Tensor x = leaf({1, -6}, {2}, DType::float32);
  Tensor y;
  REQUIRE_NOTHROW(y = log(x));
  CHECK(std::isnan(y.to_vector()[1]));
  CHECK(std::isnan(div(tensor({0}, {1}), tensor({0}, {1})).item()));
  Tape::current().clear();
  const Tensor z = leaf({4, 0}, {2}, DType::float64);
  REQUIRE_NOTHROW(backward(sum(sqrt(z))));
  CHECK(std::isinf(z.grad().to_vector()[1]));
}

TEST_CASE("anomaly: the guard restores the previous state, also when an error leaves its scope") {
  REQUIRE_FALSE(detect_anomaly());
  {
    DetectAnomalyGuard on;
    CHECK(detect_anomaly());
    {
      DetectAnomalyGuard off(false);
      CHECK_FALSE(detect_anomaly());
      CHECK_NOTHROW(log(tensor({-1}, {1})));
    }
    CHECK(detect_anomaly());
  }
  CHECK_FALSE(detect_anomaly());
  CHECK_THROWS_AS(
      [] {
        DetectAnomalyGuard on;
        log(tensor({-1}, {1}));
      }(),
      AnomalyError);
  CHECK_FALSE(detect_anomaly());
}

TEST_CASE("anomaly: after an error in the forward or the backward the tape works as before") {
  DetectAnomalyGuard detect;
  const Tensor x = leaf({4, 0, 1}, {3}, DType::float64);
  // Forward: the failing op records nothing; the next step's backward walks past what the failed one left.
  CHECK_THROWS_AS(sum(log(x - 2.0)), AnomalyError);
  backward(sum(x * x));
  CHECK(x.grad().to_vector() == std::vector<double>{8, 0, 2});
  CHECK(Tape::current().size() == 0);
  // Backward: the tape is released as a finished backward releases it.
  x.zero_grad();
  const Tensor loss = sum(sqrt(x));
  CHECK_THROWS_AS(backward(loss), AnomalyError);
  CHECK(Tape::current().size() == 0);
  x.zero_grad();
  backward(sum(x * 3.0));
  CHECK(x.grad().to_vector() == std::vector<double>{3, 3, 3});
}

TEST_CASE("anomaly: scopes nest with '.', an empty name adds nothing, one owner appears once") {
  DetectAnomalyGuard detect;
  CHECK(current_scope().empty());
  const int model = 0, layer = 0;
  {
    ScopeName root("", &model);
    CHECK(current_scope().empty());
    ScopeName encoder("encoder");
    ScopeName layers("layers");
    ScopeName one("1", &layer);
    ScopeName again("1", &layer);  // a layer's forward calling its own helper
    CHECK(current_scope() == "encoder.layers.1");
    {
      ScopeName attn("self_attn");
      CHECK(current_scope() == "encoder.layers.1.self_attn");
    }
    CHECK(current_scope() == "encoder.layers.1");
  }
  CHECK(current_scope().empty());
  {
    DetectAnomalyGuard off(false);
    ScopeName ignored("head");
    CHECK(current_scope().empty());  // kept only while detection is on
  }
}

TEST_CASE("anomaly: messages name the scope, a backward one the scope its op ran in") {
  DetectAnomalyGuard detect;
  const Tensor x = leaf({-1, 0}, {2}, DType::float32);
  {
    ScopeName encoder("encoder");
    ScopeName head("head");
    CHECK(anomaly_message([&] { log(x); }) ==
          "anomaly: forward of log produced NaN (element [0] of output [2]); inputs [2]; in encoder.head");
  }
  CHECK(current_scope().empty());  // the error left every scope it passed
  Tensor loss;
  {
    ScopeName block("block");
    loss = sum(sqrt(x + 1.0));
  }
  CHECK_THAT(anomaly_message([&] { backward(loss); }),
             StartsWith("anomaly: backward of sqrt produced Inf in the gradient of input 0") && Contains("; in block"));
}
