// Tensors: creation, dtypes, views, the seeded generator and the print format.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/autograd.h"

using namespace tapegrad;
using Catch::Matchers::Contains;

TEST_CASE("tensor: creation functions fill as named") {
  CHECK(zeros({2, 3}).to_vector() == std::vector<double>(6, 0));
  CHECK(ones({2}, DType::float64).to_vector() == std::vector<double>{1, 1});
  CHECK(full({3}, 2.5).to_vector() == std::vector<double>{2.5, 2.5, 2.5});
  CHECK(arange(4).to_vector() == std::vector<double>{0, 1, 2, 3});
  CHECK(arange(4).dtype() == DType::int64);
  CHECK(arange(1, 2, 0.25, DType::float64).to_vector() == std::vector<double>{1, 1.25, 1.5, 1.75});
  Tensor t = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.at({1, 2}) == 6);
  CHECK(t.dtype() == DType::float32);
  CHECK(ids({3, 1}, {2}).to_int_vector() == std::vector<int64_t>{3, 1});
  CHECK(mask({1, 0}, {2}).to_vector() == std::vector<double>{1, 0});
}

TEST_CASE("tensor: float32 and float64 are chosen at run time") {
  Tensor a = tensor({0.1}, DType::float64);
  Tensor b = a.to(DType::float32);
  CHECK(b.dtype() == DType::float32);
  CHECK(b.item() == static_cast<double>(0.1f));
  CHECK(a.item() == 0.1);
  CHECK_THROWS_AS(a.data<float>(), DTypeError);
}

TEST_CASE("tensor: views share storage and reshape does not copy when the layout allows") {
  Tensor t = arange(0, 24, 1, DType::float32);
  Tensor r = reshape(t, {2, 3, 4});
  CHECK(r.storage() == t.storage());
  Tensor p = permute(r, {2, 0, 1});
  CHECK(p.storage() == t.storage());
  CHECK_FALSE(p.is_contiguous());
  CHECK(p.at({3, 1, 2}) == r.at({1, 2, 3}));
  Tensor s = slice(r, 2, 1, 3);
  CHECK(s.storage() == t.storage());
  CHECK(reshape(s, {12}).storage() != t.storage());  // not expressible with strides: a copy
  Tensor back = reshape(transpose(transpose(r, 0, 2), 0, 2), {6, 4});
  CHECK(back.storage() == t.storage());
  CHECK(p.contiguous().is_contiguous());
  CHECK(p.contiguous().to_vector() == p.to_vector());
}

TEST_CASE("tensor: data_ptr is the address of a view's first element, in every dtype") {
  for (DType dtype : {DType::float32, DType::float64, DType::int64, DType::boolean}) {
    INFO(dtype_name(dtype));
    Tensor t = arange(0, 24, 1, dtype == DType::boolean ? DType::int64 : dtype).to(dtype);
    const Tensor s = slice(reshape(t, {4, 6}), 0, 2, 4);  // starts at element 12
    CHECK(s.offset() == 12);
    CHECK(static_cast<char*>(s.data_ptr()) - static_cast<char*>(t.data_ptr()) == 12 * int64_t(itemsize(dtype)));
    CHECK(s.at({0, 0}) == t.to_vector()[12]);
  }
  Tensor x = arange(0, 8, 1, DType::float64);
  const Tensor v = slice(x, 0, 3, 8);
  CHECK(v.data<double>() == static_cast<double*>(v.data_ptr()));
  CHECK(*v.data<double>() == 3);
}

TEST_CASE("tensor: rank 4 and beyond") {
  Tensor t = zeros({1, 2, 3, 4, 1, 2});
  CHECK(t.dim() == 6);
  CHECK(t.numel() == 48);
  CHECK(unsqueeze(t, 0).dim() == 7);
}

TEST_CASE("tensor: the generator gives the same numbers for the same seed, on every platform") {
  Generator g1(42), g2(42), g3(43);
  const uint64_t first = g1.next_u64();
  CHECK(first == g2.next_u64());
  CHECK(first != g3.next_u64());
  // Pinned values: xoshiro256** seeded by splitmix64 is fully specified, so these never change.
  Generator pinned(0);
  CHECK(pinned.next_u64() == 0x99ec5f36cb75f2b4ULL);
  Generator u(7);
  double lo = 1, hi = 0, total = 0;
  for (int i = 0; i < 10000; ++i) {
    const double x = u.uniform();
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    total += x;
  }
  CHECK(lo >= 0);
  CHECK(hi < 1);
  CHECK(total / 10000 == Approx(0.5).margin(0.02));
  Generator n(7);
  double s1 = 0, s2 = 0;
  for (int i = 0; i < 20000; ++i) {
    const double x = n.normal();
    s1 += x;
    s2 += x * x;
  }
  CHECK(s1 / 20000 == Approx(0).margin(0.03));
  CHECK(s2 / 20000 == Approx(1).margin(0.04));
  Generator r1(5), r2(5);
  CHECK(randn({4}, r1).to_vector() == randn({4}, r2).to_vector());
}

TEST_CASE("tensor: generator state round-trips exactly") {
  Generator g(11);
  g.normal();  // leaves a spare normal cached
  const auto state = g.state();
  const double a = g.normal(), b = g.uniform();
  Generator h(0);
  h.set_state(state);
  CHECK(h.normal() == a);
  CHECK(h.uniform() == b);
}

TEST_CASE("tensor: printing follows PyTorch's format") {
  CHECK(tensor({0.9544, 1.4950, 1.4754}).str() == "tensor([0.9544, 1.4950, 1.4754])");
  CHECK(tensor({2, 0, 2}).str() == "tensor([2., 0., 2.])");
  CHECK(tensor({1, 2, 3, 4}, {2, 2}).str() == "tensor([[1., 2.],\n        [3., 4.]])");
  CHECK(tensor({0.5}, Shape{}).str() == "tensor(0.5000)");
  CHECK(ids({1, 22}, {2}).str() == "tensor([ 1, 22])");
  CHECK(mask({1, 0}, {2}).str() == "tensor([ True, False])");
  CHECK(tensor({-0.0739, 0.0713}, DType::float64).str() == "tensor([-0.0739,  0.0713], dtype=float64)");
  CHECK(tensor({1e-6, 1}).str() == "tensor([1.0000e-06, 1.0000e+00])");
  const std::string big = zeros({2, 1000}).str();
  CHECK_THAT(big, Contains("..."));
  CHECK(big.size() < 200);
  Tensor w = tensor({1, 2}).requires_grad_();
  CHECK_THAT(w.str(), Contains("requires_grad=True"));
  CHECK_THAT((w * 2.0).str(), Contains("grad_fn=<mul_scalar>"));
  Tape::current().clear();
  const std::string three_d = zeros({2, 1, 2}).str();
  CHECK(three_d == "tensor([[[0., 0.]],\n\n        [[0., 0.]]])");
}
