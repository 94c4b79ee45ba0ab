// matmul: values, layouts BLAS reads in place, broadcasting and gradients.
#include <catch2/catch.hpp>

#include "autograd/autograd.h"

using namespace tapegrad;

TEST_CASE("matmul: 2-D product equals the hand-computed one") {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = tensor({7, 8, 9, 10, 11, 12}, {3, 2});
  CHECK(matmul(a, b).to_vector() == std::vector<double>{58, 64, 139, 154});
}

TEST_CASE("matmul: transposed operands give the same result as contiguous copies") {
  Generator gen(3);
  Tensor a = randn({4, 3}, gen, DType::float64), b = randn({5, 4}, gen, DType::float64);
  Tensor viewed = matmul(transpose(a, 0, 1), transpose(b, 0, 1));
  Tensor copied = matmul(transpose(a, 0, 1).contiguous(), transpose(b, 0, 1).contiguous());
  CHECK(max_abs_diff(viewed, copied) < 1e-12);
}

TEST_CASE("matmul: batch dims broadcast and per-batch products agree") {
  Generator gen(4);
  Tensor a = randn({2, 1, 3, 4}, gen, DType::float64), b = randn({5, 4, 2}, gen, DType::float64);
  Tensor c = matmul(a, b);
  REQUIRE(c.shape() == Shape{2, 5, 3, 2});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      Tensor single = matmul(select(select(a, 0, i), 0, 0), select(b, 0, j));
      CHECK(max_abs_diff(select(select(c, 0, i), 0, j), single) < 1e-12);
    }
}

TEST_CASE("matmul: vectors follow torch.matmul") {
  Tensor v = tensor({1, 2});
  Tensor m = tensor({1, 2, 3, 4}, {2, 2});
  CHECK(matmul(v, m).shape() == Shape{2});
  CHECK(matmul(v, m).to_vector() == std::vector<double>{7, 10});
  CHECK(matmul(m, v).to_vector() == std::vector<double>{5, 11});
  CHECK(matmul(v, v).shape() == Shape{});
  CHECK(matmul(v, v).item() == 5);
}

TEST_CASE("matmul: empty inner dim gives zeros") {
  Tensor c = matmul(zeros({2, 0}), zeros({0, 3}));
  CHECK(c.to_vector() == std::vector<double>(6, 0));
}

TEST_CASE("matmul: gradient of a broadcast operand sums over the batch") {
  Tensor a = tensor({1, 2}, {1, 2}, DType::float64).requires_grad_();
  Tensor b = ones({3, 2, 1}, DType::float64);
  Tensor c = matmul(a, b);  // (3,1,1)
  backward(sum(c));
  CHECK(a.grad().to_vector() == std::vector<double>{3, 3});
}

TEST_CASE("linear_relu: the same values and gradients as relu(linear(x)), bit for bit, and linear's checks") {
  Generator gen(11);
  for (DType dtype : {DType::float32, DType::float64}) {
   for (int threads : {1, 2}) {  // (64·32) × 128 × 512: the products are split between two threads
    set_num_threads(threads);
    const Tensor x = randn({64, 32, 128}, gen, dtype).requires_grad_(), w = randn({512, 128}, gen, dtype).requires_grad_(),
                 b = randn({512}, gen, dtype).requires_grad_();
    const Tensor upstream = randn({64, 32, 512}, gen, dtype);
    auto run = [&](bool fused) {
      for (const Tensor* t : {&x, &w, &b}) t->zero_grad();
      const Tensor y = fused ? linear_relu(x, w, b) : relu(linear(x, w, b));
      backward(y, upstream);
      return std::vector<std::vector<double>>{y.to_vector(), x.grad().to_vector(), w.grad().to_vector(),
                                              b.grad().to_vector()};
    };
    const auto fused = run(true), composed = run(false);
    CHECK(fused == composed);
    int64_t zeros = 0;
    for (double v : fused[0]) zeros += v == 0;
    CHECK(zeros > 0);  // the kink is exercised: some outputs are clamped
   }
  }
  set_num_threads(0);
  CHECK_THROWS_WITH(linear_relu(zeros({2, 5}), zeros({3, 4}), zeros({3})),
                    Catch::Contains("linear_relu: x [2,5] @ weight [3,4]"));
  CHECK_THROWS_WITH(linear_relu(zeros({2, 4}), zeros({3, 4}), zeros({2})), Catch::Contains("does not match weight"));
}
