// The dynamic tape: recording, gradient accumulation, release, and misuse.
#include <catch2/catch.hpp>
#include <cmath>
#include <thread>

#include "autograd/autograd.h"

using namespace tapegrad;
using Catch::Matchers::Contains;

namespace {
Tensor leaf(std::vector<double> values, Shape shape, DType dtype = DType::float64) {
  return tensor(values, shape, dtype).requires_grad_();
}
}  // namespace

TEST_CASE("tape: an op records one entry only when an input requires grad") {
  Tape::current().clear();
  Tensor a = tensor({1, 2, 3});
  Tensor b = a * a;
  CHECK(Tape::current().size() == 0);
  CHECK_FALSE(b.requires_grad());
  Tensor c = leaf({1, 2, 3}, {3}, DType::float32);
  Tensor d = c * a + 1.0;
  CHECK(Tape::current().size() == 2);
  CHECK(d.requires_grad());
  CHECK_FALSE(d.is_leaf());
  CHECK_THAT(Tape::current().dump(), Contains("#0 mul [3] <- leaf[3] const[3]") && Contains("#1 add_scalar [3] <- #0[3]"));
  Tape::current().clear();
}

TEST_CASE("tape: a diamond b = a + a, c = b * b sums every path") {
  Tensor a = leaf({1.5, -2}, {2});
  Tensor b = a + a;
  Tensor c = b * b;  // c = 4a², dc/da = 8a
  backward(sum(c));
  CHECK(a.grad().to_vector() == std::vector<double>{12, -16});
}

TEST_CASE("tape: a tensor used k times receives the sum of k contributions") {
  Tensor x = leaf({2}, {1});
  Tensor y = x * x * x + x;  // 3x² + 1 = 13
  backward(sum(y));
  CHECK(x.grad().item() == Approx(13));
}

TEST_CASE("tape: a chain of 100k ops walks back without recursion") {
  Tensor x = leaf({1}, {1});
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = y * 1.0;
  backward(sum(y));
  CHECK(x.grad().item() == 1);
  CHECK(Tape::current().size() == 0);
}

TEST_CASE("tape: leaf gradients accumulate across backward calls until zero_grad") {
  Tensor x = leaf({1, 2}, {2});
  backward(sum(x * 3.0));
  backward(sum(x * 3.0));
  CHECK(x.grad().to_vector() == std::vector<double>{6, 6});
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("tape: backward releases the tape, so memory returns after each step") {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = sum(x * x);
  std::weak_ptr<Storage> saved = x.storage();
  CHECK(Tape::current().size() > 0);
  backward(y);
  CHECK(Tape::current().size() == 0);
  CHECK_THROWS_AS(backward(y), AutogradError);
  CHECK_THROWS_WITH(backward(y), Contains("already released"));
}

TEST_CASE("tape: retain_tape keeps it for a second backward") {
  Tensor x = leaf({3}, {1});
  Tensor y = sum(x * x);
  backward(y, {}, true);
  backward(y);
  CHECK(x.grad().item() == 12);
}

TEST_CASE("tape: using a result of a released tape in a new op is an error") {
  Tensor x = leaf({3}, {1});
  Tensor y = x * 2.0;
  backward(sum(y), {}, false);
  CHECK_THROWS_WITH(y * 2.0, Contains("mul") && Contains("released"));
  Tensor z = y.detach() * x;  // a detached copy is a constant: fine
  CHECK(z.requires_grad());
  Tape::current().clear();
}

TEST_CASE("tape: backward on a non-scalar needs an explicit gradient") {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor y = x * 2.0;
  CHECK_THROWS_WITH(backward(y), Contains("not a scalar") && Contains("[3]"));
  backward(y, tensor({1, 0, -1}, {3}, DType::float64));
  CHECK(x.grad().to_vector() == std::vector<double>{2, 0, -2});
  CHECK_THROWS_AS(backward(tensor({1.0})), AutogradError);
}

TEST_CASE("tape: a gradient of the wrong shape is refused") {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor y = x * 2.0;
  CHECK_THROWS_WITH(backward(y, zeros({2}, DType::float64)), Contains("[2]") && Contains("[3]"));
  Tape::current().clear();
}

TEST_CASE("tape: NoGradGuard records nothing and detach cuts the graph") {
  Tensor x = leaf({1, 2}, {2});
  {
    NoGradGuard guard;
    Tensor y = x * x;
    CHECK_FALSE(y.requires_grad());
    CHECK_FALSE(grad_enabled());
  }
  CHECK(grad_enabled());
  Tensor d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.storage() == x.storage());
  Tensor y = x * d;  // d is a constant: dy/dx = d
  backward(sum(y));
  CHECK(x.grad().to_vector() == std::vector<double>{1, 2});
}

TEST_CASE("tape: writing in place into a tensor a backward saved is detected") {
  Tensor x = leaf({1, 2}, {2});
  Tensor w = tensor({3, 4}, {2}, DType::float64);
  Tensor y = sum(x * w);  // mul saves w
  w.fill_(0);
  CHECK_THROWS_WITH(backward(y), Contains("mul backward") && Contains("modified in place"));
  Tape::current().clear();
}

TEST_CASE("tape: in-place writes into tensors that require grad are refused outside NoGradGuard") {
  Tensor x = leaf({1, 2}, {2});
  CHECK_THROWS_AS(x.fill_(0), AutogradError);
  NoGradGuard guard;
  x.fill_(0);
  CHECK(x.to_vector() == std::vector<double>{0, 0});
}

TEST_CASE("tape: gradients flow through transposed, sliced and reshaped views") {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t = transpose(x, 0, 1);              // (3,2) view
  Tensor s = slice(t, 0, 1, 3);               // rows 1..2 of the transpose: x[:,1:3]ᵀ
  Tensor r = reshape(s, {4});                 // not viewable: copies
  Tensor w = tensor({1, 10, 100, 1000}, {4}, DType::float64);
  backward(sum(r * w));
  // r = [x01, x11, x02, x12]
  CHECK(x.grad().to_vector() == std::vector<double>{0, 1, 100, 0, 10, 1000});
}

TEST_CASE("tape: broadcasting in both operands sums gradients back to each shape") {
  Tensor a = leaf({1, 2, 3}, {3, 1});
  Tensor b = leaf({10, 20}, {1, 2});
  backward(sum(a * b));
  CHECK(a.grad().to_vector() == std::vector<double>{30, 30, 30});
  CHECK(b.grad().to_vector() == std::vector<double>{6, 6});
}

TEST_CASE("tape: float32 leaves get float32 gradients") {
  Tensor x = leaf({1, 2}, {2}, DType::float32);
  backward(sum(exp(x)));
  CHECK(x.grad().dtype() == DType::float32);
  CHECK(x.grad().at({1}) == Approx(std::exp(2.0)).epsilon(1e-6));
}

TEST_CASE("tape: requires_grad only for float leaves") {
  CHECK_THROWS_AS(ids({1, 2}, {2}).requires_grad_(), DTypeError);
  Tensor x = leaf({1}, {1});
  Tensor y = x * 2.0;
  CHECK_THROWS_AS(y.requires_grad_(false), AutogradError);
  Tape::current().clear();
}

TEST_CASE("tape: each thread records on its own tape") {
  Tensor x = leaf({2}, {1});
  Tensor y = x * x;
  size_t other_size = 99;
  std::thread worker([&] {
    Tensor a = leaf({1}, {1});
    Tensor b = a * 3.0;
    other_size = Tape::current().size();
    backward(sum(b));
  });
  worker.join();
  CHECK(other_size == 1);
  backward(sum(y));
  CHECK(x.grad().item() == 4);
}
