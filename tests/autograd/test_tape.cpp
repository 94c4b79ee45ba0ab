// The dynamic tape: recording, gradient accumulation, release, and misuse.
#include <catch2/catch.hpp>
#include <cmath>
#include <thread>

#include "autograd/autograd.h"
#include "autograd/ops/attention.h"

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
  Tensor y;
  std::weak_ptr<Storage> saved;  // exp's output, which its node saves and which nothing else holds
  {
    const Tensor e = exp(x);
    saved = e.storage();
    y = sum(e * 2.0);
  }
  CHECK(Tape::current().size() > 0);
  CHECK_FALSE(saved.expired());  // the tape holds it for exp's backward
  backward(y);
  CHECK(Tape::current().size() == 0);
  CHECK(saved.expired());  // released with the tape
  CHECK_THROWS_AS(backward(y), AutogradError);
  CHECK_THROWS_WITH(backward(y), Contains("already released"));
}

TEST_CASE("tape: each entry frees what it saved as soon as its backward has run, not at the end") {
  Tensor x = leaf({1, 2, 3, 4}, {4});
  Tensor y;
  std::weak_ptr<Storage> saved;  // exp's output: exp's entry (1) saves it, the mul after it does not
  bool freed_before_last_entry = false;
  {
    const Tensor e = exp(x * 3.0);  // entry 0 runs last, after exp's
    saved = e.storage();
    y = sum(e * 2.0);
  }
  backward(y, [&](size_t entry) {
    if (entry == 0) freed_before_last_entry = saved.expired();
  });
  CHECK(freed_before_last_entry);
}

TEST_CASE("tape: a rule that writes over dout leaves a gradient the caller passed intact") {
  // linear_relu computes its relu mask's product over dout where nothing but the tape holds dout; the
  // caller's gradient is held by the caller, so it must get a buffer of its own.
  Generator gen(3);
  const Tensor x = randn({4, 3}, gen).requires_grad_(), w = randn({5, 3}, gen).requires_grad_(),
               b = randn({5}, gen).requires_grad_();
  const Tensor g = randn({4, 5}, gen), g_copy = g.clone();
  backward(linear_relu(x, w, b), g);
  CHECK(max_abs_diff(g, g_copy) == 0);
  CHECK(x.grad().defined());
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

TEST_CASE("tape: an op given one tensor for several inputs adds every contribution, in either order") {
  // Each rule asks for its inputs' buffers in its own order; the first may be a new buffer that a rule
  // would assign into. With one tensor in two places, the second contribution must add to the first.
  Generator gen(5);
  const Tensor square = randn({4, 4}, gen, DType::float64), row = randn({4}, gen, DType::float64);
  auto positive = [](const Tensor& t) { NoGradGuard no_grad; return exp(t * 0.3); };
  const std::vector<std::pair<const char*, TensorFn>> cases = {
      {"mul(x, x)", [](auto& in) { return mul(in[0], in[0]); }},
      {"add(x, x)", [](auto& in) { return add(in[0], in[0]); }},
      {"sub(x, x) + x", [](auto& in) { return sub(in[0], in[0]) + in[0]; }},
      {"div(x, x) * x", [](auto& in) { return div(in[0], in[0]) * in[0]; }},
      {"matmul(x, x)", [](auto& in) { return matmul(in[0], in[0]); }},
      {"linear(x, x, row)", [](auto& in) { return linear(in[0], in[0], in[1]); }},
      {"where(mask, x, x)", [](auto& in) { return where(mask({1, 0, 0, 1}, {4}), in[0], in[0]); }},
      {"concat(x, x)", [](auto& in) { return concat({in[0], in[0]}, 0); }},
      {"layer_norm(v, v, v)", [](auto& in) { return layer_norm(in[1], in[1], in[1]); }},
  };
  for (const auto& [name, f] : cases) {
    INFO(name);
    const Tensor x = (std::string(name).starts_with("div") ? positive(square) : square).clone().requires_grad_();
    const Tensor v = row.clone().requires_grad_();
    const GradcheckResult result = gradcheck(f, {x, v});
    INFO(result.str());
    CHECK(result.passed);
  }
}

TEST_CASE("tape: a gradient assigned into a new buffer equals the same gradient added into an existing one") {
  // The first backward writes each leaf's .grad as a new buffer (assigned), the second adds into it: the
  // result must be exactly twice the first, for every kind of rule (elementwise, row, fused, BLAS). Checked
  // for x and qkv, whose elements each get one contribution (a sum over rows, like a bias gradient's, is
  // rounded in another order when it starts from a value).
  Generator gen(9);
  const Tensor x0 = randn({2, 3, 8}, gen, DType::float32), w0 = randn({8}, gen, DType::float32);
  const Tensor m0 = randn({8, 8}, gen, DType::float32), qkv0 = randn({2, 3, 24}, gen, DType::float32);
  const Tensor targets = ids({1, 0, 7, 3, 5, 2}, {6});
  const std::vector<std::pair<const char*, TensorFn>> cases = {
      {"gelu", [](auto& in) { return gelu(in[0]); }},
      {"softmax", [](auto& in) { return softmax(in[0]); }},
      {"softmax over a middle dim", [](auto& in) { return softmax(in[0], 1); }},
      {"log_softmax", [](auto& in) { return log_softmax(in[0]); }},
      {"layer_norm", [](auto& in) { return layer_norm(in[0], in[1], in[1]); }},
      {"matmul", [](auto& in) { return matmul(in[0], in[2]); }},
      {"linear", [](auto& in) { return linear(in[0], in[2], in[1]); }},
      {"cross_entropy", [&](auto& in) { return cross_entropy(reshape(in[0], {6, 8}), targets); }},
      {"attention", [](auto& in) { return fused_self_attention(in[3], 2).output; }},
      {"mul broadcast", [](auto& in) { return in[0] * in[1]; }},
      {"slice", [](auto& in) { return slice(in[0], 2, 1, 5); }},
  };
  for (const auto& [name, f] : cases) {
    INFO(name);
    const std::vector<Tensor> in = {x0.clone().requires_grad_(), w0.clone().requires_grad_(),
                                    m0.clone().requires_grad_(), qkv0.clone().requires_grad_()};
    const Tensor r = [&] {
      NoGradGuard no_grad;
      Generator cotangent(3);
      return randn(f(in).shape(), cotangent, DType::float32);
    }();
    Tape::current().clear();
    backward(f(in), r);
    std::vector<std::vector<double>> once;
    for (const Tensor& t : in) once.push_back(t.grad().defined() ? t.grad().to_vector() : std::vector<double>{});
    backward(f(in), r);
    for (size_t k : {0, 3}) {
      if (once[k].empty()) continue;
      std::vector<double> twice = once[k];
      for (double& g : twice) g = static_cast<double>(static_cast<float>(g) + static_cast<float>(g));
      CHECK(in[k].grad().to_vector() == twice);
    }
  }
}
