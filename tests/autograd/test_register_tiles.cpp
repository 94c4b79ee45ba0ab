// The register tiles (kernels/register_tiles.h, AVX-512 or AVX2 vectors) against plain loops in double;
// gemm_on_this_thread, which gives them small float products, in every layout; and the fused attention's
// float32 heads, which run on them, against the same op in float64 (BLAS). Built without the tiles (neither
// AVX-512 nor AVX2 + FMA), the kernel cases are skipped and the others check the BLAS path.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/register_tiles.h"

using namespace tapegrad;

namespace {

/// max |a - b| / max(1, max |b|), NaN where a difference is NaN
double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  double err = 0, scale = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    const double difference = std::abs(a[i] - b[i]);
    if (std::isnan(difference)) return difference;  // std::max would drop it
    err = std::max(err, difference);
    scale = std::max(scale, std::abs(b[i]));
  }
  return err / scale;
}

std::vector<float> random_floats(Generator& gen, int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  for (float& e : x) e = static_cast<float>(gen.normal());
  return x;
}

}  // namespace

#ifdef TAPEGRAD_REGISTER_TILES

TEST_CASE("register tiles: tile_product equals the plain product for every tile height, both layouts of A") {
  // At both vector widths of the build: 16 and 8 lanes with AVX-512 (its products of widths in 8s take the
  // narrow ones), 8 with AVX2 only.
  Generator gen(5);
  const auto check_width = [&](auto lanes) {
    constexpr int64_t L = decltype(lanes)::value;
    for (const int64_t rows : {1, 5, 6, 7, 13, 32})
      for (const int64_t vectors : {1, 2, 3})
        for (const int64_t K : {1, 7, 16})
          for (const bool a_transposed : {false, true})
            for (const bool accumulate : {false, true}) {
              const int64_t n = L * vectors, lda = (a_transposed ? rows : K) + 3, ldb = n + 5, ldc = n + 2;
              // A(r, k) = a[r·lda + k], or with A stored transposed a[k·lda + r]
              const std::vector<float> a = random_floats(gen, (a_transposed ? K : rows) * lda),
                                       b = random_floats(gen, K * ldb);
              std::vector<float> c = random_floats(gen, rows * ldc);
              const std::vector<float> before = c;
              const float alpha = 0.75f;
              register_tiles::tile_product<L>(rows, vectors, K, a.data(), a_transposed ? 1 : lda,
                                              a_transposed ? lda : 1, b.data(), ldb, c.data(), ldc, alpha, accumulate);
              std::vector<double> got, want;
              for (int64_t r = 0; r < rows; ++r)
                for (int64_t j = 0; j < ldc; ++j) {
                  double expected = before[r * ldc + j];  // columns past n are untouched
                  if (j < n) {
                    double sum = 0;
                    for (int64_t k = 0; k < K; ++k)
                      sum += static_cast<double>(a_transposed ? a[k * lda + r] : a[r * lda + k]) * b[k * ldb + j];
                    expected = (accumulate ? expected : 0.0) + alpha * sum;
                  }
                  got.push_back(c[r * ldc + j]);
                  want.push_back(expected);
                }
              INFO(L << " lanes, rows " << rows << ", vectors " << vectors << ", K " << K << ", A transposed "
                     << a_transposed << ", accumulate " << accumulate);
              CHECK(relative_error(got, want) < 1e-5);
            }
  };
  check_width(std::integral_constant<int64_t, register_tiles::kLanes>{});
  check_width(std::integral_constant<int64_t, register_tiles::kNarrowLanes>{});
}

TEST_CASE("register tiles: transpose_into is the exact transpose, in 8 x 8 blocks and element by element") {
  Generator gen(6);
  for (const auto& [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{16, 24}, {8, 8}, {32, 16}, {5, 3}, {8, 12}}) {
    const int64_t ldm = cols + 4;
    const std::vector<float> m = random_floats(gen, rows * ldm);
    std::vector<float> t(static_cast<size_t>(rows * cols), -1.0f);
    register_tiles::transpose_into(m.data(), ldm, rows, cols, t.data());
    int64_t wrong = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) wrong += t[c * rows + r] != m[r * ldm + c];
    INFO(rows << " x " << cols);
    CHECK(wrong == 0);
  }
}

#else

TEST_CASE("register tiles: not built for this CPU") {
  WARN("neither AVX-512 nor AVX2 + FMA: the register tiles are not built");
}

#endif

TEST_CASE("gemm_on_this_thread: float products equal the plain product in every layout, written and added") {
  // Sizes across the row blocks (48 rows) and the tile heights; n a multiple of 8 (the tiles: 8 or 16 lanes)
  // or not (12, 94, 270: the tiles with a partial last vector where op(b) = bᵀ and n ≥ 32, else BLAS); an odd
  // number of vectors (the one-vector tiles); op(b) over kTiledProductMaxB (in blocks on the tiles with
  // AVX-512, on BLAS with AVX2): 256 × 256 (one block), and 300 × 272 and 300 × 270 (two blocks of 256 and 16
  // or 14 columns by two of 256 and 44 rows). c's rows have a column past n, which must keep its number.
  Generator gen(8);
  struct Size {
    int64_t m, n, k;
  };
  for (const Size& size : {Size{1, 8, 1}, Size{47, 24, 17}, Size{47, 48, 17}, Size{49, 64, 64}, Size{100, 16, 5},
                           Size{13, 12, 9}, Size{31, 94, 40}, Size{7, 256, 256}, Size{50, 272, 300},
                           Size{50, 270, 300}})
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true})
        for (const float beta : {0.0f, 1.0f}) {
          const auto [m, n, k] = size;
          const int64_t lda = (trans_a ? m : k) + 2, ldb = (trans_b ? k : n) + 3, ldc = n + 1;
          const std::vector<float> a = random_floats(gen, (trans_a ? k : m) * lda),
                                   b = random_floats(gen, (trans_b ? n : k) * ldb);
          std::vector<float> c = random_floats(gen, m * ldc);
          const std::vector<float> before = c;
          gemm_on_this_thread(trans_a, trans_b, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
          std::vector<double> got, want;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < ldc; ++j) {
              double expected = before[i * ldc + j];
              if (j < n) {
                double sum = 0;
                for (int64_t p = 0; p < k; ++p)
                  sum += static_cast<double>(trans_a ? a[p * lda + i] : a[i * lda + p]) *
                         (trans_b ? b[j * ldb + p] : b[p * ldb + j]);
                expected = beta * expected + 0.5 * sum;
              }
              got.push_back(c[i * ldc + j]);
              want.push_back(expected);
            }
          INFO(m << " x " << n << " x " << k << ", trans_a " << trans_a << ", trans_b " << trans_b << ", beta "
                 << beta);
          CHECK(relative_error(got, want) < 1e-5);
        }
}

TEST_CASE("fused_self_attention: float32 heads (on the register tiles) equal the float64 op") {
  // T = 32 and D = 16 (every product on the tiles), T = 12 (S = Q Kᵀ and dP = dO Vᵀ, 12 columns, on BLAS, the
  // others on the tiles); a key padding mask and the causal mask; qkv also read by a view, so that the op's
  // gradient is added to a buffer in use (beta = 1) as well as written (beta = 0).
  for (const int64_t T : {32, 12}) {
    const int64_t B = 2, H = 2, D = 16, C = H * D;
    Generator gen(7);
    const Tensor x64 = randn({B, T, 3 * C}, gen, DType::float64), up64 = randn({B, T, C}, gen, DType::float64);
    std::vector<int> pads(static_cast<size_t>(B * T), 0), causal(static_cast<size_t>(T * T), 0);
    for (int64_t t = T - 3; t < T; ++t) pads[T + t] = 1;  // batch 1's last 3 keys
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = i + 1; j < T; ++j) causal[i * T + j] = 1;
    const Tensor padding = mask(pads, {B, T}), attn = mask(causal, {T, T});
    const auto run = [&](DType dtype, bool added) {
      const Tensor x = x64.to(dtype).detach().requires_grad_();
      const Tensor out = fused_self_attention(x, H, attn, padding).output;
      const Tensor loss = added ? sum((out + slice(x, 2, 0, C)) * up64.to(dtype)) : sum(out * up64.to(dtype));
      backward(loss);
      return std::pair{out.to_vector(), x.grad().to_vector()};
    };
    for (const bool added : {false, true}) {
      const auto [out32, grad32] = run(DType::float32, added);
      const auto [out64, grad64] = run(DType::float64, added);
      INFO("T " << T << ", gradient added to a used buffer " << added);
      CHECK(relative_error(out32, out64) < 1e-5);
      CHECK(relative_error(grad32, grad64) < 1e-5);
    }
  }
}
