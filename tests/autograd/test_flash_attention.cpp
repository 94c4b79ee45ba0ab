// Flash attention: the tiled kernels against the plain reference for every mask and bias with blocks that
// do not divide T; the op against attention composed from primitives; its dropout; its memory, linear in T;
// its errors. The float64 gradchecks of the op are in the registry (ops/flash_attention.cpp).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/kernels/flash_attention.h"
#include "autograd/kernels/flash_attention_tiles.h"

using namespace tapegrad;

namespace {

/// max |a - b| / max(1, max |b|): the kernels' error relative to the size of the values (NaN where a
/// difference is NaN).
template <class T>
double relative_error(const std::vector<T>& a, const std::vector<T>& b) {
  double err = 0, scale = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    const double difference = std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (std::isnan(difference)) return difference;  // std::max would drop it
    err = std::max(err, difference);
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return err / scale;
}

struct HeadCase {
  int64_t T_q, T_k, D, D_v;
  bool causal;
  int padding;  // 0: none, 1: every third key hidden, 2: every key, 3: the last half (a short row padded to
               // its batch's length: whole key blocks hidden), 4: the first third
  double slope, dropout;
  int64_t zero_gradient_rows = 0;  // the last rows of dO are 0 (a classifier's padded positions): skipped
};

/// n standard normal numbers of gen.
template <class T>
std::vector<T> random_values(Generator& gen, int64_t n) {
  std::vector<T> x(static_cast<size_t>(n));
  for (T& e : x) e = static_cast<T>(gen.normal());
  return x;
}

/// The case's key padding: one flag a key (see HeadCase::padding).
std::vector<char> hidden_keys_of(const HeadCase& c) {
  std::vector<char> hidden(static_cast<size_t>(c.T_k), c.padding == 2);
  for (int64_t j = 0; j < c.T_k; ++j)
    if ((c.padding == 1 && j % 3 == 0) || (c.padding == 3 && j >= c.T_k / 2) || (c.padding == 4 && j < c.T_k / 3))
      hidden[j] = 1;
  return hidden;
}

/// The case's scoring, its padding read from `hidden` (hidden_keys_of), its dropout mask from `stream`.
HeadScoring scoring_of(const HeadCase& c, const std::vector<char>& hidden, uint64_t stream) {
  HeadScoring scoring;
  scoring.scale = 0.4;
  scoring.causal = c.causal;
  scoring.hidden_keys = c.padding ? reinterpret_cast<const bool*>(hidden.data()) : nullptr;
  scoring.alibi_slope = c.slope;
  scoring.dropout_p = c.dropout;
  scoring.dropout_stream = stream;
  return scoring;
}

/// Runs the fast kernels and the reference on one head of random numbers; returns the worst relative error
/// over out, dq, dk, dv.
template <class T>
double kernel_error(const HeadCase& c, AttentionBlocks blocks, uint64_t seed) {
  Generator gen(seed);
  const std::vector<T> q = random_values<T>(gen, c.T_q * c.D), k = random_values<T>(gen, c.T_k * c.D),
                       v = random_values<T>(gen, c.T_k * c.D_v);
  std::vector<T> dout = random_values<T>(gen, c.T_q * c.D_v);
  std::fill(dout.end() - c.zero_gradient_rows * c.D_v, dout.end(), T(0));
  const std::vector<char> hidden = hidden_keys_of(c);
  const HeadScoring scoring = scoring_of(c, hidden, seed * 977);
  std::vector<T> out(q.size() / c.D * c.D_v), lse(c.T_q), dq(q.size()), dk(k.size()), dv(v.size());
  std::vector<T> out_ref(out.size()), dq_ref(dq.size()), dk_ref(dk.size()), dv_ref(dv.size());
  const HeadMatrix<const T> Q{q.data(), c.D}, K{k.data(), c.D}, V{v.data(), c.D_v}, dO{dout.data(), c.D_v};
  flash_attention_forward<T>(Q, K, V, c.T_q, c.T_k, c.D, c.D_v, scoring, blocks, {out.data(), c.D_v}, lse.data());
  flash_attention_backward<T>(Q, K, V, {out.data(), c.D_v}, lse.data(), dO, c.T_q, c.T_k, c.D, c.D_v, scoring, blocks,
                              {dq.data(), c.D}, {dk.data(), c.D}, {dv.data(), c.D_v});
  attention_reference<T>(Q, K, V, c.T_q, c.T_k, c.D, c.D_v, scoring, {out_ref.data(), c.D_v}, dO, {dq_ref.data(), c.D},
                         {dk_ref.data(), c.D}, {dv_ref.data(), c.D_v});
  return std::max({relative_error(out, out_ref), relative_error(dq, dq_ref), relative_error(dk, dk_ref),
                   relative_error(dv, dv_ref)});
}

std::string describe(const HeadCase& c, AttentionBlocks blocks) {
  std::ostringstream text;
  text << "T_q " << c.T_q << " T_k " << c.T_k << " D " << c.D << " D_v " << c.D_v << " causal " << c.causal
       << " padding " << c.padding << " slope " << c.slope << " dropout " << c.dropout << " blocks " << blocks.queries
       << "x" << blocks.keys << " zero dO rows " << c.zero_gradient_rows;
  return text.str();
}

/// softmax(scale · q kᵀ - slope·|i - j|, masked) v from primitives: the materialised attention.
Tensor composed_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                          const Tensor& padding, const std::vector<double>& slopes) {
  const int64_t B = q.size(0), H = q.size(1), T_q = q.size(2), T_k = k.size(2);
  Tensor scores = matmul(q * scale, transpose(k, -2, -1));
  if (!slopes.empty()) {
    std::vector<double> bias(static_cast<size_t>(H * T_q * T_k));
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T_q; ++i)
        for (int64_t j = 0; j < T_k; ++j) bias[(h * T_q + i) * T_k + j] = -slopes[h] * std::abs(static_cast<double>(i - j));
    scores = scores + tensor(bias, {H, T_q, T_k}, q.dtype());
  }
  const double inf = std::numeric_limits<double>::infinity();
  if (causal) {
    std::vector<int> above(static_cast<size_t>(T_q * T_k));
    for (int64_t i = 0; i < T_q; ++i)
      for (int64_t j = i + 1; j < T_k; ++j) above[i * T_k + j] = 1;
    scores = masked_fill(scores, mask(above, {T_q, T_k}), -inf);
  }
  if (padding.defined()) scores = masked_fill(scores, reshape(padding, {B, 1, 1, T_k}), -inf);
  return matmul(softmax(scores, -1), v);
}

}  // namespace

TEST_CASE("flash_attention kernels: equal the plain reference for every mask and bias, blocks not dividing T") {
  const std::vector<HeadCase> cases{
      {7, 7, 4, 4, false, 0, 0, 0},    {7, 7, 4, 4, true, 0, 0, 0},     {9, 5, 3, 6, false, 1, 0.3, 0},
      {5, 9, 3, 6, true, 1, 0.3, 0.2}, {1, 1, 2, 2, false, 0, 0, 0},    {6, 6, 2, 3, true, 2, 0, 0},
      {33, 17, 8, 5, false, 1, 0, 0.3}, {40, 40, 16, 16, true, 1, 0.5, 0.1}, {17, 33, 8, 8, true, 0, 0.2, 0},
      {21, 30, 8, 8, false, 3, 0, 0},  {30, 30, 8, 8, true, 3, 0, 0.1},  {19, 26, 4, 4, false, 4, 0.3, 0},
      {30, 30, 4, 4, false, 3, 0, 0.2, 17}, {12, 12, 3, 3, true, 0, 0.3, 0, 12},
  };
  const std::vector<AttentionBlocks> blockings{{3, 5}, {1, 1}, {4, 2}, {64, 128}};
  uint64_t seed = 1;
  for (const HeadCase& c : cases)
    for (const AttentionBlocks& blocks : blockings) {
      INFO(describe(c, blocks));
      CHECK(kernel_error<double>(c, blocks, seed) < 1e-12);
      CHECK(kernel_error<float>(c, blocks, seed) < 1e-5);
      ++seed;
    }
}

TEST_CASE("flash_attention tiles: float32 heads of widths in 16s equal the reference, T and blocks off the lanes") {
  if (!flash_tiles_serve(16, 16)) {
    WARN("this build has no register-tiled kernels (neither AVX-512 nor AVX2 + FMA): the BLAS kernels ran above");
    return;
  }
  CHECK_FALSE(flash_tiles_serve(16, 5));  // a width off the lanes takes the BLAS kernels
  // Widths in 16s serve both vector widths (8 lanes on AVX2, 16 on AVX-512); D_v = 48 is three vectors on
  // AVX-512 (a tile pair and a single). T = 130 crosses the default 64-query blocks twice.
  std::vector<HeadCase> cases{
      {1, 1, 16, 16, false, 0, 0, 0},     {13, 13, 16, 48, true, 1, 0.3, 0.2},  {70, 45, 48, 16, false, 3, 0, 0},
      {45, 70, 64, 64, true, 4, 0.25, 0}, {130, 130, 32, 32, true, 3, 0, 0.1}, {9, 9, 16, 32, false, 2, 0, 0},
      {140, 140, 16, 16, false, 3, 0, 0.1, 70}, {20, 20, 16, 16, true, 0, 0.2, 0, 20},
  };
  if (flash_tiles_serve(8, 24)) {  // 8 lanes (AVX2): widths of one and three vectors
    cases.push_back({70, 45, 24, 8, false, 3, 0, 0});
    cases.push_back({13, 13, 8, 24, true, 1, 0.3, 0.2});
  }
  const std::vector<AttentionBlocks> blockings{{0, 0}, {3, 5}, {16, 7}, {64, 64}};
  uint64_t seed = 100;
  for (const HeadCase& c : cases)
    for (const AttentionBlocks& blocks : blockings) {
      INFO(describe(c, blocks));
      CHECK(kernel_error<float>(c, blocks, seed++) < 1e-5);
    }
  // accumulate = true adds the gradients to what the buffers hold: twice the same call doubles them exactly.
  Generator gen(5);
  const int64_t T = 20, D = 16;
  std::vector<float> q(T * D), k(T * D), v(T * D), dout(T * D), out(T * D), lse(T), dq(T * D), dk(T * D), dv(T * D);
  for (std::vector<float>* x : {&q, &k, &v, &dout})
    for (float& e : *x) e = static_cast<float>(gen.normal());
  HeadScoring scoring;
  scoring.scale = 0.3;
  scoring.causal = true;
  const HeadMatrix<const float> Q{q.data(), D}, K{k.data(), D}, V{v.data(), D}, O{out.data(), D}, dO{dout.data(), D};
  flash_attention_forward<float>(Q, K, V, T, T, D, D, scoring, {}, {out.data(), D}, lse.data());
  flash_attention_backward<float>(Q, K, V, O, lse.data(), dO, T, T, D, D, scoring, {}, {dq.data(), D}, {dk.data(), D},
                                  {dv.data(), D});
  const std::vector<float> once_q = dq, once_k = dk, once_v = dv;
  flash_attention_backward<float>(Q, K, V, O, lse.data(), dO, T, T, D, D, scoring, {}, {dq.data(), D}, {dk.data(), D},
                                  {dv.data(), D}, true);
  for (size_t i = 0; i < dq.size(); ++i) {
    CHECK(dq[i] == 2 * once_q[i]);
    CHECK(dk[i] == 2 * once_k[i]);
    CHECK(dv[i] == 2 * once_v[i]);
  }
}

namespace {

/// One head's backward split at `splits` (key indices, multiples of the key block) against the whole head's:
/// the ranges' dQ terms summed, each range's dK and dV rows, and no row of dK or dV outside its range touched.
/// Returns the worst relative error (or infinity when a row outside a range was written).
template <class T>
double key_range_error(const HeadCase& c, AttentionBlocks blocks, const std::vector<int64_t>& splits, uint64_t seed) {
  Generator gen(seed);
  const std::vector<T> q = random_values<T>(gen, c.T_q * c.D), k = random_values<T>(gen, c.T_k * c.D),
                       v = random_values<T>(gen, c.T_k * c.D_v), dout = random_values<T>(gen, c.T_q * c.D_v);
  const std::vector<char> hidden = hidden_keys_of(c);
  const HeadScoring scoring = scoring_of(c, hidden, seed * 31);
  std::vector<T> out(c.T_q * c.D_v), lse(c.T_q), dq(c.T_q * c.D), dk(c.T_k * c.D), dv(c.T_k * c.D_v);
  const HeadMatrix<const T> Q{q.data(), c.D}, K{k.data(), c.D}, V{v.data(), c.D_v}, O{out.data(), c.D_v},
      dO{dout.data(), c.D_v};
  flash_attention_forward<T>(Q, K, V, c.T_q, c.T_k, c.D, c.D_v, scoring, blocks, {out.data(), c.D_v}, lse.data());
  flash_attention_backward<T>(Q, K, V, O, lse.data(), dO, c.T_q, c.T_k, c.D, c.D_v, scoring, blocks, {dq.data(), c.D},
                              {dk.data(), c.D}, {dv.data(), c.D_v});
  std::vector<T> dq_sum(dq.size(), T(0)), dk_ranges(dk.size()), dv_ranges(dv.size());
  const T untouched = std::numeric_limits<T>::quiet_NaN();
  for (size_t r = 0; r + 1 < splits.size(); ++r) {
    std::vector<T> dq_part(dq.size()), dk_part(dk.size(), untouched), dv_part(dv.size(), untouched);
    flash_attention_backward<T>(Q, K, V, O, lse.data(), dO, c.T_q, c.T_k, c.D, c.D_v, scoring, blocks,
                                {dq_part.data(), c.D}, {dk_part.data(), c.D}, {dv_part.data(), c.D_v}, false,
                                {splits[r], splits[r + 1]});
    for (size_t i = 0; i < dq.size(); ++i) dq_sum[i] += dq_part[i];
    for (int64_t j = 0; j < c.T_k; ++j) {
      const bool inside = j >= splits[r] && j < splits[r + 1];
      for (int64_t e = 0; e < c.D; ++e) {
        if (inside) dk_ranges[j * c.D + e] = dk_part[j * c.D + e];
        else if (!std::isnan(dk_part[j * c.D + e])) return std::numeric_limits<double>::infinity();
      }
      for (int64_t e = 0; e < c.D_v; ++e) {
        if (inside) dv_ranges[j * c.D_v + e] = dv_part[j * c.D_v + e];
        else if (!std::isnan(dv_part[j * c.D_v + e])) return std::numeric_limits<double>::infinity();
      }
    }
  }
  return std::max({relative_error(dq_sum, dq), relative_error(dk_ranges, dk), relative_error(dv_ranges, dv)});
}

}  // namespace

TEST_CASE("flash_attention kernels: a head's backward split into key ranges adds up to the whole head's") {
  // Key blocks of 4 (BLAS kernels; the tiles take the key block as given too): ranges of 2, 1 and 3 blocks
  // and a last range that ends with the keys, mid-block.
  const std::vector<HeadCase> cases{
      {23, 26, 8, 8, false, 0, 0, 0}, {26, 26, 8, 16, true, 1, 0.3, 0}, {19, 26, 8, 8, true, 0, 0, 0.2},
      {26, 26, 8, 8, false, 1, 0.25, 0.1},
  };
  const std::vector<int64_t> splits{0, 8, 12, 24, 26};
  uint64_t seed = 300;
  for (const HeadCase& c : cases) {
    INFO(describe(c, {5, 4}));
    CHECK(key_range_error<double>(c, {5, 4}, splits, seed) < 1e-12);
    CHECK(key_range_error<float>(c, {5, 4}, splits, seed) < 1e-5);
    CHECK(key_range_error<float>(c, {16, 4}, {0, 12, 26}, seed) < 1e-5);  // on the tiles, where they serve
    ++seed;
  }
}

TEST_CASE("flash_attention: few heads on two threads split their keys, with the gradients of one thread") {
  // B·H = 2 heads, fewer than the threads could share: backward runs each head as key ranges on 2 threads
  // (nothing to split on 1). The gradients must not change beyond rounding, whether written into a new
  // buffer or added to a used one (the second backward).
  Generator gen(9);
  const int64_t B = 1, H = 2, T = 45, D = 8, C = H * D;
  for (DType dtype : {DType::float64, DType::float32}) {
    const Tensor qkv_data = randn({B, T, 3 * C}, gen, dtype), dout = randn({B, H, T, D}, gen, dtype);
    FlashAttentionOptions options;
    options.causal = true;
    options.alibi_slopes = {0.5, 0.25};
    options.blocks = {4, 4};  // 12 key blocks: 2 ranges of 6 on 2 threads
    auto gradient_on = [&](int threads) {
      set_num_threads(threads);
      Tensor qkv = qkv_data.clone().requires_grad_();
      backward(flash_self_attention(qkv, H, options), dout);
      const Tensor once = qkv.grad().clone();
      backward(flash_self_attention(qkv, H, options), dout);
      set_num_threads(0);
      return std::make_pair(once, qkv.grad());
    };
    const auto [one_once, one_twice] = gradient_on(1);
    const auto [two_once, two_twice] = gradient_on(2);
    const double tolerance = dtype == DType::float64 ? 1e-12 : 1e-5;
    INFO(dtype_name(dtype));
    CHECK(max_abs_diff(two_once, one_once) < tolerance);
    CHECK(max_abs_diff(two_twice, one_twice) < tolerance);
    CHECK(max_abs_diff(one_twice, one_once * 2.0) < tolerance);
  }
}

TEST_CASE("flash_attention: output and gradients equal attention composed from primitives (float32 within 2e-5)") {
  Generator gen(5);
  const int64_t B = 2, H = 3, T = 37, D = 8, C = H * D;
  // q, k, v as nn's split_heads leaves them: strided (B, H, T, D) views of one (B, T, 3C) projection.
  const Tensor qkv_data = randn({B, T, 3 * C}, gen);
  const Tensor padding = mask(std::vector<int>(static_cast<size_t>(B * T), 0), {B, T});
  std::vector<int> pads(static_cast<size_t>(B * T), 0);
  for (int64_t j = T - 5; j < T; ++j) pads[T + j] = 1;  // batch 1: the last 5 keys are padding
  const Tensor key_padding = mask(pads, {B, T});
  const Tensor dout = randn({B, H, T, D}, gen);
  for (bool causal : {false, true})
    for (bool alibi : {false, true}) {
      INFO("causal " << causal << " alibi " << alibi);
      const std::vector<double> slopes = alibi ? std::vector<double>{0.5, 0.25, 0.125} : std::vector<double>{};
      auto run = [&](bool flash, std::vector<Tensor>& grads) {
        Tensor qkv = qkv_data.clone().requires_grad_();
        auto head = [&](int64_t part) { return transpose(reshape(slice(qkv, 2, part * C, (part + 1) * C), {B, T, H, D}), 1, 2); };
        const Tensor q = head(0), k = head(1), v = head(2);
        Tensor out;
        if (flash) {
          FlashAttentionOptions options;
          options.causal = causal;
          options.key_padding_mask = key_padding;
          options.alibi_slopes = slopes;
          options.blocks = {16, 8};
          out = flash_attention(q, k, v, options);
        } else {
          out = composed_attention(q, k, v, 1 / std::sqrt(double(D)), causal, key_padding, slopes);
        }
        backward(out, dout);
        grads = {qkv.grad()};
        return out.detach();
      };
      std::vector<Tensor> flash_grads, composed_grads;
      const Tensor flash = run(true, flash_grads), composed = run(false, composed_grads);
      CHECK(max_abs_diff(flash, composed) < 2e-5);
      CHECK(max_abs_diff(flash_grads[0], composed_grads[0]) < 2e-5);
    }
  (void)padding;
}

TEST_CASE("flash_self_attention on the packed projection equals flash_attention on its split heads") {
  Generator gen(8);
  const int64_t B = 2, T = 300, H = 4, D = 8, C = H * D;
  const Tensor qkv_data = randn({B, T, 3 * C}, gen), dout = randn({B, H, T, D}, gen);
  FlashAttentionOptions options;
  options.causal = true;
  options.alibi_slopes = {0.5, 0.25, 0.125, 0.0625};
  auto run = [&](bool packed) {
    Tensor qkv = qkv_data.clone().requires_grad_();
    auto head = [&](int64_t part) { return transpose(reshape(slice(qkv, 2, part * C, (part + 1) * C), {B, T, H, D}), 1, 2); };
    const Tensor out = packed ? flash_self_attention(qkv, H, options) : flash_attention(head(0), head(1), head(2), options);
    backward(out, dout);
    return std::make_pair(out.detach(), qkv.grad());
  };
  const auto [packed_out, packed_grad] = run(true);
  const auto [split_out, split_grad] = run(false);
  CHECK(max_abs_diff(packed_out, split_out) == 0);  // the same kernels on the same numbers
  CHECK(max_abs_diff(packed_grad, split_grad) == 0);
}

TEST_CASE("flash_attention: dropout drops p of the probabilities, the same ones for the same seed") {
  int64_t kept = 0;
  const int64_t n = 200000;
  for (int64_t j = 0; j < n; ++j) kept += dropout_keeps(12345, 3, j, n, 0.3);
  CHECK(std::abs(static_cast<double>(kept) / n - 0.7) < 0.005);

  Generator gen(2);
  const Tensor q = randn({1, 2, 9, 4}, gen), k = randn({1, 2, 9, 4}, gen), v = randn({1, 2, 9, 4}, gen);
  auto with_seed = [&](uint64_t seed) {
    Generator rng(seed);
    FlashAttentionOptions options;
    options.dropout_p = 0.5;
    options.dropout_rng = &rng;
    return flash_attention(q, k, v, options);
  };
  CHECK(max_abs_diff(with_seed(7), with_seed(7)) == 0);
  CHECK(max_abs_diff(with_seed(7), with_seed(8)) > 0);
}

TEST_CASE("flash_attention: tensor memory of a T = 4096 forward and backward is linear in T, not quadratic") {
  Generator gen(3);
  const int64_t B = 1, H = 2, D = 32;
  auto peak_bytes = [&](int64_t T) {
    Tensor q = randn({B, H, T, D}, gen).requires_grad_(), k = randn({B, H, T, D}, gen).requires_grad_(),
           v = randn({B, H, T, D}, gen).requires_grad_();
    const Tensor dout = randn({B, H, T, D}, gen);
    reset_peak_tensor_bytes();
    const uint64_t before = tensor_bytes().live;
    FlashAttentionOptions options;
    options.causal = true;
    backward(flash_attention(q, k, v, options), dout);
    return tensor_bytes().peak - before;
  };
  const uint64_t at_2048 = peak_bytes(2048), at_4096 = peak_bytes(4096);
  const uint64_t one_head_matrix = 4096ull * 4096 * sizeof(float);  // what one materialised (T, T) head takes
  INFO("peak tensor bytes: " << at_2048 << " at T = 2048, " << at_4096 << " at T = 4096");
  // out, lse and the three gradients (and their leaf copies): about 10 (B, H, T, D) tensors.
  CHECK(at_4096 <= 12 * B * H * 4096 * D * sizeof(float));
  CHECK(at_4096 < one_head_matrix / 8);
  CHECK(at_4096 <= 2 * at_2048 + 4096);
}

TEST_CASE("flash_attention: bad arguments get one clear error") {
  Generator gen(4);
  const Tensor q = randn({2, 2, 5, 4}, gen), k = randn({2, 2, 6, 4}, gen), v = randn({2, 2, 6, 3}, gen);
  CHECK_THROWS_WITH(flash_attention(q, randn({2, 2, 6, 5}, gen), v), Catch::Contains("flash_attention: q [2,2,5,4]"));
  CHECK_THROWS_WITH(flash_attention(reshape(q, {4, 5, 4}), k, v), Catch::Contains("must be (B, H, T, D)"));
  FlashAttentionOptions options;
  options.key_padding_mask = mask(std::vector<int>(10, 0), {2, 5});
  CHECK_THROWS_WITH(flash_attention(q, k, v, options), Catch::Contains("key_padding_mask [2,5] bool must be bool (B, T_k) = [2,6]"));
  options = {};
  options.alibi_slopes = {0.5};
  CHECK_THROWS_WITH(flash_attention(q, k, v, options), Catch::Contains("1 ALiBi slopes for 2 heads"));
  options = {};
  options.dropout_p = 0.1;
  CHECK_THROWS_WITH(flash_attention(q, k, v, options), Catch::Contains("needs a generator"));
  options.dropout_p = 1;
  CHECK_THROWS_WITH(flash_attention(q, k, v, options), Catch::Contains("dropout_p must be in [0, 1)"));
}
