// `make bench-products`: the matrix products of one training step of the `small` and `medium` bench
// models, each through OpenBLAS's cblas_sgemm and through oneDNN's dnnl_sgemm, on one thread and on two, to choose the
// library (and a threshold per shape) by measurement (docs/performance.md, "Product libraries").
//
// For each linear layer of the model (q|k|v projection, output projection, feed-forward in and out) the
// three products of its step: forward Y = X Wᵀ, dX = dY W, dW = dYᵀ X; and one attention head's two
// forward products S = Q Kᵀ and O = P V. Columns, each the best of 7 runs, in GFLOP/s:
//   1 thread:  OpenBLAS | oneDNN (its OpenMP team held to 1 thread)
//   2 threads: OpenBLAS split in two by the caller on tapegrad's pool, as tapegrad does (each half of the
//              rows one single-threaded call) | oneDNN split the same way
// (oneDNN's own OpenMP team is not measured: a second owner of the cores beside tapegrad's pool.)
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.h>

#include "autograd/parallel.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Product {
  std::string name;
  bool trans_a, trans_b;
  int64_t m, n, k;
  double flops() const { return 2.0 * static_cast<double>(m * n * k); }
};

/// The products of one step of a model with N = batch·T rows, width C, feed-forward F, head size D.
std::vector<Product> step_products(const std::string& model, int64_t N, int64_t C, int64_t F, int64_t T, int64_t D) {
  std::vector<Product> products;
  const auto linear = [&](const std::string& layer, int64_t in, int64_t out) {  // Y (N, out) = X (N, in) Wᵀ
    products.push_back({model + " " + layer + " Y=XW^T", false, true, N, out, in});
    products.push_back({model + " " + layer + " dX=dY W", false, false, N, in, out});
    products.push_back({model + " " + layer + " dW=dY^T X", true, false, out, in, N});
  };
  linear("qkv", C, 3 * C);
  linear("out", C, C);
  linear("ff1", C, F);
  linear("ff2", F, C);
  products.push_back({model + " head S=QK^T", false, true, T, T, D});
  products.push_back({model + " head O=PV", false, false, T, D, T});
  return products;
}

/// Seconds per call of `run`, the best of 7 runs of enough calls for ~50 ms.
double best_seconds(const std::function<void()>& run, double flops) {
  const int calls = static_cast<int>(std::clamp(5e9 / flops, 3.0, 20000.0));
  double best = 1e30;
  for (int trial = 0; trial < 7; ++trial) {
    const auto start = Clock::now();
    for (int i = 0; i < calls; ++i) run();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count() / calls);
  }
  return best;
}

void onednn(const Product& p, int64_t first, int64_t rows, const float* a, const float* b, float* c) {
  omp_set_num_threads(1);  // this thread alone, as tapegrad calls it (the pool's worker included)
  const int64_t lda = p.trans_a ? p.m : p.k, ldb = p.trans_b ? p.k : p.n;
  dnnl_sgemm(p.trans_a ? 'T' : 'N', p.trans_b ? 'T' : 'N', rows, p.n, p.k, 1.f, p.trans_a ? a + first : a + first * lda,
             lda, b, ldb, 0.f, c + first * p.n, p.n);
}

void openblas(const Product& p, int64_t first, int64_t rows, const float* a, const float* b, float* c) {
  const int64_t lda = p.trans_a ? p.m : p.k, ldb = p.trans_b ? p.k : p.n;
  cblas_sgemm(CblasRowMajor, p.trans_a ? CblasTrans : CblasNoTrans, p.trans_b ? CblasTrans : CblasNoTrans, rows, p.n,
              p.k, 1.f, p.trans_a ? a + first : a + first * lda, lda, b, ldb, 0.f, c + first * p.n, p.n);
}

/// part(0) and part(1) at once on tapegrad's pool of 2 threads, as its products run.
void split_in_two(const std::function<void(int)>& part) {
  tapegrad::parallel_for(2, 1, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) part(static_cast<int>(i));
  });
}

}  // namespace

int main() {
  tapegrad::set_num_threads(2);  // sets OpenBLAS's own pool to one thread, as in training
  omp_set_num_threads(1);        // and oneDNN's OpenMP team on this thread
  std::vector<Product> products = step_products("small", 64 * 32, 64, 128, 32, 16);
  for (const Product& p : step_products("medium", 32 * 128, 256, 1024, 128, 32)) products.push_back(p);
  std::vector<float> a(1 << 22, 0.5f), b(1 << 22, 0.25f), c(1 << 22);
  std::printf("%-40s %9s %9s | %9s %9s   GFLOP/s: 1 thread | 2 threads\n", "product (m x n x k)", "OpenBLAS", "oneDNN",
              "OpenBLAS", "oneDNN");
  for (const Product& p : products) {
    const int64_t half = p.m / 2;
    const double flops = p.flops();
    const double blas_one = best_seconds([&] { openblas(p, 0, p.m, a.data(), b.data(), c.data()); }, flops);
    const double dnn_one = best_seconds([&] { onednn(p, 0, p.m, a.data(), b.data(), c.data()); }, flops);
    const auto split = [&](auto product) {
      return best_seconds([&] {
        split_in_two([&](int part) { product(p, part ? half : 0, part ? p.m - half : half, a.data(), b.data(), c.data()); });
      }, flops);
    };
    const double blas_split = split(openblas), dnn_split = split(onednn);
    const std::string name = p.name + " (" + std::to_string(p.m) + "x" + std::to_string(p.n) + "x" + std::to_string(p.k) + ")";
    std::printf("%-40s %9.1f %9.1f | %9.1f %9.1f\n", name.c_str(), flops / blas_one / 1e9, flops / dnn_one / 1e9,
                flops / blas_split / 1e9, flops / dnn_split / 1e9);
  }
}
