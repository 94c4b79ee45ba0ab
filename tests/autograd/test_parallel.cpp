// The thread pool: every index once, small work kept on the caller, errors carried back, and results
// that do not depend on the thread count beyond the stated tolerance.
#include <catch2/catch.hpp>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "autograd/autograd.h"

using namespace tapegrad;

namespace {
/// Restores the thread count a test changed.
struct ThreadCount {
  explicit ThreadCount(int n) : previous(num_threads()) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(previous); }
  int previous;
};
}  // namespace

TEST_CASE("parallel_for: covers every index exactly once, in ranges of at least the grain") {
  ThreadCount threads(4);
  for (int64_t n : {1, 7, 64, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<int64_t> smallest{n};
    parallel_for(n, 5, [&](int64_t begin, int64_t end) {
      if (end < n) smallest = std::min<int64_t>(smallest, end - begin);
      for (int64_t i = begin; i < end; ++i) ++hits[static_cast<size_t>(i)];
    });
    for (auto& h : hits) CHECK(h == 1);
    CHECK(smallest >= std::min<int64_t>(n, 5));
  }
}

TEST_CASE("parallel_for: a nested call runs serially and an exception reaches the caller") {
  ThreadCount threads(2);
  std::atomic<int64_t> total{0};
  parallel_for(100, 1, [&](int64_t begin, int64_t end) {
    parallel_for(end - begin, 1, [&](int64_t b, int64_t e) { total += e - b; });
  });
  CHECK(total == 100);
  CHECK_THROWS_WITH(parallel_for(100, 1,
                                 [](int64_t begin, int64_t) {
                                   if (begin > 0) throw std::runtime_error("part failed");
                                 }),
                    "part failed");
  // The pool still works after a failed job.
  std::atomic<int64_t> after{0};
  parallel_for(10, 1, [&](int64_t b, int64_t e) { after += e - b; });
  CHECK(after == 10);
}

TEST_CASE("parallel_for_each_dynamic: every item once, one at a time, uneven items shared, errors carried back") {
  ThreadCount threads(3);
  for (int64_t n : {1, 2, 5, 300}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<bool> one_at_a_time{true};
    parallel_for_each_dynamic(n, 1, [&](int64_t begin, int64_t end) {
      if (end != begin + 1) one_at_a_time = false;
      for (int64_t i = begin; i < end; ++i) ++hits[static_cast<size_t>(i)];
    });
    for (auto& h : hits) CHECK(h == 1);
    CHECK(one_at_a_time);
  }
  // Item 0 blocks until another item has run: with equal ranges of one thread each that could still hold,
  // but it proves the other threads go on taking items while one is busy.
  std::atomic<int64_t> done{0};
  parallel_for_each_dynamic(20, 1, [&](int64_t i, int64_t) {
    if (i == 0)
      while (done.load() < 19) sched_yield();
    ++done;
  });
  CHECK(done == 20);
  CHECK_THROWS_WITH(parallel_for_each_dynamic(50, 1,
                                              [](int64_t i, int64_t) {
                                                if (i == 17) throw std::runtime_error("item failed");
                                              }),
                    "item failed");
  std::atomic<int64_t> serial{0};  // n <= grain: the calling thread alone, in order
  parallel_for_each_dynamic(8, 8, [&](int64_t i, int64_t) { CHECK(serial.fetch_add(1) == i); });
  CHECK(serial == 8);
}

TEST_CASE("set_num_threads: 0 means every core the process may run on, and the count is kept") {
  ThreadCount restore(num_threads());
  set_num_threads(3);
  CHECK(num_threads() == 3);
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof(allowed), &allowed) == 0);
  set_num_threads(0);
  CHECK(num_threads() == CPU_COUNT(&allowed));
  // The cores it may run on, not the machine's: pinned to one core, 0 means one thread.
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) {
      CPU_SET(cpu, &one);
      break;
    }
  REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
  set_num_threads(0);
  const int pinned = num_threads();
  REQUIRE(sched_setaffinity(0, sizeof(allowed), &allowed) == 0);  // before the pool grows back
  CHECK(pinned == 1);
}

// Products split across threads compute each element of the result whole in one BLAS call, so a split
// product equals the unsplit one to within the rounding of the kernels' own blocking: the tolerance
// docs/performance.md states for --threads 1 against --threads 2 (relative 1e-5 in float32).
TEST_CASE("matmul and attention-style batches: 1 and 4 threads agree (float32, rel 1e-5)") {
  Generator gen(5);
  const Tensor a = randn({512, 256}, gen), b = randn({256, 384}, gen);
  const Tensor qa = randn({8, 4, 64, 32}, gen), kb = randn({8, 4, 32, 64}, gen);
  Tensor one, one_batched, four, four_batched;
  {
    ThreadCount threads(1);
    one = matmul(a, b);
    one_batched = matmul(qa, kb);
  }
  {
    ThreadCount threads(4);
    four = matmul(a, b);
    four_batched = matmul(qa, kb);
  }
  CHECK(max_abs_diff(one, four) <= 1e-5 * max_abs_diff(one, zeros_like(one)));
  CHECK(max_abs_diff(one_batched, four_batched) <= 1e-5 * max_abs_diff(one_batched, zeros_like(one_batched)));
}

TEST_CASE("row kernels split across threads: maps are bit-identical on 1 and 3 threads, the sums over rows agree") {
  // Sizes above the split threshold (grain_for_elements), with a broadcast operand, a transposed view, a
  // single long row and rows summed into a bias-shaped gradient.
  Generator gen(11);
  const Tensor x = randn({96, 40, 33}, gen).requires_grad_(), bias = randn({33}, gen).requires_grad_();
  const Tensor other = randn({33, 40, 96}, gen);
  const Tensor w = randn({33}, gen).requires_grad_(), b = randn({33}, gen).requires_grad_();
  struct Results {
    Tensor out, dx, dbias, dw, db;
  };
  const auto run = [&](int threads) {
    ThreadCount count(threads);
    for (Tensor t : {x, bias, w, b}) t.zero_grad();
    const Tensor y = gelu(x * 1.5 + bias) + transpose(other, 0, 2);   // maps, broadcast, a strided operand
    const Tensor z = layer_norm(y, w, b, 1e-5) * y;                    // LayerNorm rows, a product's backward
    const Tensor r = randn(z.shape(), gen);
    backward(sum(z * r));
    return Results{z.detach(), x.grad().clone(), bias.grad().clone(), w.grad().clone(), b.grad().clone()};
  };
  const Generator::State seed = gen.state();
  const Results one = run(1);
  gen.set_state(seed);
  const Results three = run(3);
  CHECK(max_abs_diff(one.out, three.out) == 0);  // each element computed as serially
  CHECK(max_abs_diff(one.dx, three.dx) == 0);
  // bias sums its 3 840 rows in one run of rows a thread, the runs' partial sums added in order: each of the
  // two float sums is within (rows - 1)·u·sum|terms| of the exact one. Its terms are dx / 1.5 (x's scale).
  const int64_t rows = 96 * 40, C = 33;
  const std::vector<double> dx = one.dx.to_vector(), db1 = one.dbias.to_vector(), db3 = three.dbias.to_vector();
  for (int64_t c = 0; c < C; ++c) {
    double terms = 0;
    for (int64_t r = 0; r < rows; ++r) terms += std::abs(dx[r * C + c]) / 1.5;
    CHECK(std::abs(db1[c] - db3[c]) <= 2.0 * static_cast<double>(rows) * 0x1p-24 * terms * 1.01);
  }
  // LayerNorm's dw and db add per-thread partial sums (in double): equal to float32 rounding
  CHECK(max_abs_diff(one.dw, three.dw) <= 1e-5 * max_abs_diff(one.dw, zeros_like(one.dw)));
  CHECK(max_abs_diff(one.db, three.db) <= 1e-5 * max_abs_diff(one.db, zeros_like(one.db)));
}

TEST_CASE("reductions along a dim and a gradient's first copy split across threads: bit-identical on 1 and 3") {
  // Lanes above the split threshold, read in place and through a transposed view; each lane is summed by one
  // thread in its own order. One input of an add gets dout copied into its fresh buffer (the assign path of
  // accumulate), a copy split across the threads too.
  Generator gen(12);
  const Tensor x = randn({96, 40, 33}, gen).requires_grad_(), x2 = randn({96, 40, 33}, gen).requires_grad_();
  const Tensor y = randn({33, 40, 96}, gen);
  struct Results {
    Tensor sum, mean, transposed_sum, max, argmax, dx, dx2;
  };
  const auto run = [&](int threads) {
    ThreadCount count(threads);
    x.zero_grad();
    x2.zero_grad();
    const Tensor s = sum(x, 1), m = mean(x, 1, true), t = sum(transpose(y, 0, 2), 1);
    const Tensor values = max(transpose(y, 0, 2), 1), indices = argmax(transpose(y, 0, 2), 1);
    backward(sum((x + x2) * 2));  // add's backward hands dout to one input and copies it for the other
    return Results{s, m, t, values, indices, x.grad().clone(), x2.grad().clone()};
  };
  const Results one = run(1), three = run(3);
  CHECK(max_abs_diff(one.sum, three.sum) == 0);
  CHECK(max_abs_diff(one.mean, three.mean) == 0);
  CHECK(max_abs_diff(one.transposed_sum, three.transposed_sum) == 0);
  CHECK(max_abs_diff(one.max, three.max) == 0);
  CHECK(std::equal(one.argmax.data<int64_t>(), one.argmax.data<int64_t>() + one.argmax.numel(),
                   three.argmax.data<int64_t>()));
  for (const Tensor& grad : {one.dx, one.dx2, three.dx, three.dx2}) CHECK(max_abs_diff(grad, full(x.shape(), 2)) == 0);
  // against a plain loop: lane (i, k) of sum(x, 1) is sum_j x[i, j, k] in double, rounded once
  const float* px = x.data<float>();
  const float* ps = three.sum.data<float>();
  double worst = 0;
  for (int64_t i = 0; i < 96; ++i)
    for (int64_t k = 0; k < 33; ++k) {
      double total = 0;
      for (int64_t j = 0; j < 40; ++j) total += px[(i * 40 + j) * 33 + k];
      worst = std::max(worst, std::abs(static_cast<double>(ps[i * 33 + k]) - static_cast<float>(total)));
    }
  CHECK(worst == 0);
}
