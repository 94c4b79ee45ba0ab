// matmul: values, layouts BLAS reads in place, broadcasting and gradients.
#include <catch2/catch.hpp>

#include <functional>
#include <limits>

#include "autograd/autograd.h"
#include "autograd/kernels/gemm.h"

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

TEST_CASE("nonzero_row_runs: the runs of rows that hold a non-zero, short gaps joined") {
  // 10 rows of 3 values in a leading dim of 4; the 4th column is outside the matrix and never read
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> rows[10] = {{0, 0, 0},   {0, -0.0, 0}, {0, 0, 1}, {2, 0, 0}, {0, 0, 0},
                                        {0, 0, 0},   {0, 0, 0},    {0, 3, 0}, {0, nan, 0}, {0, 0, 0}};
  std::vector<double> m;
  for (const auto& row : rows) {
    m.insert(m.end(), row.begin(), row.end());
    m.push_back(7);
  }
  std::vector<RowRun> runs;
  nonzero_row_runs(m.data(), 10, 3, 4, 1, runs);
  CHECK(runs == std::vector<RowRun>{{2, 4}, {7, 9}});
  nonzero_row_runs(m.data(), 10, 3, 4, 3, runs);  // the gap [4, 7) has 3 rows: kept
  CHECK(runs == std::vector<RowRun>{{2, 4}, {7, 9}});
  nonzero_row_runs(m.data(), 10, 3, 4, 4, runs);  // ... now under min_gap: joined
  CHECK(runs == std::vector<RowRun>{{2, 9}});
  nonzero_row_runs(m.data(), 2, 3, 4, 1, runs);  // only zeros
  CHECK(runs.empty());
}

TEST_CASE("linear: rows of zero output gradient are skipped, and every gradient equals the full products'") {
  Generator gen(12);
  const int64_t B = 3, T = 128, K = 16, N = 24;
  const Tensor x = randn({B, T, K}, gen, DType::float64).requires_grad_(), w = randn({N, K}, gen, DType::float64).requires_grad_(),
               b = randn({N}, gen, DType::float64).requires_grad_();
  const std::vector<double> dense = randn({B, T, N}, gen, DType::float64).to_vector();
  // Which rows (b·T + t) of the upstream gradient are zero: padding at the ends of sequences, zero rows in
  // three places, blocks of 32 rows (too many runs: the full product), a few rows (too few to skip), all.
  const std::vector<std::pair<const char*, std::function<bool(int64_t)>>> patterns = {
      {"padded ends", [](int64_t r) { return r % T >= (r / T == 0 ? T : 80 - 40 * (r / T - 1)); }},
      {"three gaps", [](int64_t r) { return (r >= 10 && r < 50) || (r >= 80 && r < 130) || r >= 170; }},
      {"every other block", [](int64_t r) { return r / 32 % 2 == 1; }},
      {"a few rows", [](int64_t r) { return r < 8; }},
      {"all rows", [](int64_t) { return true; }},
  };
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const auto& [name, zero_row] : patterns) {
      INFO(name << ", " << threads << " threads");
      std::vector<double> up = dense;
      for (int64_t r = 0; r < B * T; ++r)
        if (zero_row(r)) std::fill(up.begin() + r * N, up.begin() + (r + 1) * N, 0.0);
      const Tensor upstream = tensor(up, {B, T, N}, DType::float64);
      // After an earlier backward of sum(x) (x.grad = 1), linear's gradient adds into x.grad
      auto grads = [&](bool fused, bool earlier) {
        for (const Tensor* t : {&x, &w, &b}) t->zero_grad();
        if (earlier) backward(sum(x));
        backward(fused ? linear(x, w, b) : add(matmul(x, transpose(w, 0, 1)), b), upstream);
        return std::vector<Tensor>{x.grad(), w.grad(), b.grad()};
      };
      for (bool earlier : {false, true}) {
        const std::vector<Tensor> skipped = grads(true, earlier), full = grads(false, earlier);
        for (size_t i = 0; i < 3; ++i) CHECK(max_abs_diff(skipped[i], full[i]) < 1e-12);
        const std::vector<double> dx = skipped[0].to_vector();
        for (int64_t r = 0; r < B * T; ++r)
          if (zero_row(r))
            for (int64_t k = 0; k < K; ++k) REQUIRE(dx[r * K + k] == (earlier ? 1.0 : 0.0));
      }
    }
  }
  set_num_threads(0);
}
