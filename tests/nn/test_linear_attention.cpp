// Linear attention: the layer against the same function computed the direct O(T²) way (the normalised
// matrix φ(Q)φ(K)ᵀ built explicitly), padding, the causal mask, no weights, and the state layout
// it shares with the softmax component.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/attention.h"
#include "nn/encoder.h"
#include "nn/linear_attention.h"
#include "support/nn_fixtures.h"

using namespace tapegrad;
using namespace tapegrad::nn;
using namespace tapegrad::testing;

namespace {

double phi(double x) { return x > 0 ? x + 1 : std::exp(x); }  // elu(x) + 1

/// The layer's output computed without any op of the library: project, then per (b, h) build the
/// (T, T) matrix A_ij = φ(q_i)·φ(k_j) (0 for a pad key, and above the diagonal when causal), normalise its rows by Σ_j A_ij + eps, multiply
/// by v, merge the heads and project out.   x: (B, T, C) -> (B, T, C) as a flat vector
std::vector<double> direct_reference(const LinearAttention& layer, const Tensor& x, const std::vector<int>& pad,
                                     bool causal = false) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), H = layer.options().n_heads, D = C / H;
  const std::vector<double> xs = x.to_vector(), W = layer.in_proj_weight.to_vector(),
                            b = layer.in_proj_bias.to_vector(), Wo = layer.out_proj().weight.to_vector(),
                            bo = layer.out_proj().bias.to_vector();
  std::vector<double> qkv(B * T * 3 * C);
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t n = 0; n < 3 * C; ++n) {
      double s = b[n];
      for (int64_t c = 0; c < C; ++c) s += xs[r * C + c] * W[n * C + c];
      qkv[r * 3 * C + n] = s;
    }
  auto at = [&](int64_t bb, int64_t t, int64_t part, int64_t h, int64_t d) {
    return qkv[(bb * T + t) * 3 * C + part * C + h * D + d];
  };
  std::vector<double> merged(B * T * C, 0.0);
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> A(T * T);
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += phi(at(bb, i, 0, h, d)) * phi(at(bb, j, 1, h, d));
          A[i * T + j] = pad[bb * T + j] || (causal && j > i) ? 0.0 : s;
        }
      for (int64_t i = 0; i < T; ++i) {
        double z = layer.options().eps;
        for (int64_t j = 0; j < T; ++j) z += A[i * T + j];
        for (int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int64_t j = 0; j < T; ++j) o += A[i * T + j] / z * at(bb, j, 2, h, d);
          merged[(bb * T + i) * C + h * D + d] = o;
        }
      }
    }
  std::vector<double> out(B * T * C);
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t n = 0; n < C; ++n) {
      double s = bo[n];
      for (int64_t c = 0; c < C; ++c) s += merged[r * C + c] * Wo[n * C + c];
      out[r * C + n] = s;
    }
  return out;
}

std::unique_ptr<LinearAttention> make_layer(int64_t C, int64_t H, uint64_t seed = 3) {
  Generator gen(seed);
  auto layer = std::make_unique<LinearAttention>(LinearAttentionOptions{C, H}, gen);
  fill_deterministic(*layer);  // float64, and biases off zero so that a dropped bias shows
  return layer;
}

}  // namespace

TEST_CASE("linear attention: equals the normalised phi(Q) phi(K)ᵀ V built as a T x T matrix, with padding") {
  const auto layer = make_layer(8, 2);
  Generator gen(11);
  const Tensor x = randn({3, 5, 8}, gen, DType::float64);
  // batch 0 no padding, batch 1 pads two keys (one in the middle), batch 2 pads every key
  const std::vector<int> pad{0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1, 1, 1};
  const AttentionResult r = layer->attend(x, {}, mask(pad, {3, 5}), false);
  REQUIRE(r.output.shape() == Shape({3, 5, 8}));
  const std::vector<double> got = r.output.to_vector(), want = direct_reference(*layer, x, pad);
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-12));
}

TEST_CASE("linear attention: a pad key changes no output of a real position, and all keys padded gives out_proj's bias") {
  const auto layer = make_layer(6, 3);
  Generator gen(5);
  const Tensor x = randn({2, 4, 6}, gen, DType::float64);
  const Tensor pad = mask({0, 0, 1, 1, 1, 1, 1, 1}, {2, 4});
  const std::vector<double> before = layer->attend(x, {}, pad, false).output.to_vector();
  const std::vector<double> after =
      layer->attend(replace_positions(x, 0, 2, 4, gen), {}, pad, false).output.to_vector();
  for (int64_t i = 0; i < 2 * 6; ++i) CHECK(after[i] == before[i]);  // batch 0, positions 0 and 1
  // Changing a pad position must matter when it is not padded, or the check above proves nothing.
  const std::vector<double> unpadded = layer->attend(replace_positions(x, 0, 2, 4, gen), {}, {}, false).output.to_vector();
  const std::vector<double> unpadded_before = layer->attend(x, {}, {}, false).output.to_vector();
  CHECK(std::abs(unpadded[0] - unpadded_before[0]) > 1e-6);
  // Batch 1 attends to nothing: the heads' output is 0, so each position is out_proj(0) = out_proj.bias.
  const std::vector<double> bias = layer->out_proj().bias.to_vector();
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t c = 0; c < 6; ++c) CHECK(before[(4 + t) * 6 + c] == Approx(bias[c]).margin(1e-15));
}

TEST_CASE("linear attention: the causal mask by running sums equals the T x T computation, other masks are refused") {
  const auto layer = make_layer(8, 2);
  Generator gen(13);
  const Tensor x = randn({2, 5, 8}, gen, DType::float64);
  const std::vector<int> pad{0, 0, 0, 0, 0, 1, 0, 0, 1, 0};  // batch 1: query 0 sees only its pad key
  const std::vector<double> got = layer->attend(x, causal_mask(5), mask(pad, {2, 5}), false).output.to_vector();
  const std::vector<double> want = direct_reference(*layer, x, pad, true);
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-12));
  // Causality itself: changing the last position changes no earlier output.
  const std::vector<double> later = layer->attend(replace_positions(x, 0, 4, 5, gen), causal_mask(5), {}, false)
                                        .output.to_vector(),
                            before = layer->attend(x, causal_mask(5), {}, false).output.to_vector();
  for (int64_t i = 0; i < 4 * 8; ++i) CHECK(later[i] == before[i]);
  CHECK(std::abs(later[4 * 8] - before[4 * 8]) > 1e-9);
  // Any other pattern has no running-sum form: the transposed (anti-causal) mask, a float mask.
  CHECK_THROWS_WITH(layer->attend(x, transpose(causal_mask(5), 0, 1), {}, false),
                    Catch::Contains("attn_mask [5,5] is not supported"));
  CHECK_THROWS_WITH(layer->attend(x, zeros({5, 5}, DType::float64), {}, false), Catch::Contains("is not supported"));
}

TEST_CASE("linear attention: no weights to return, and a float key_padding_mask is refused") {
  const auto layer = make_layer(4, 2);
  Generator gen(2);
  const Tensor x = randn({1, 3, 4}, gen, DType::float64);
  const AttentionResult r = layer->attend(x, {}, {}, true);
  CHECK(r.output.defined());
  CHECK_FALSE(r.weights.defined());
  CHECK_THROWS_WITH(layer->attend(x, {}, ones({1, 3}, DType::float64), false), Catch::Contains("expected bool"));
}

TEST_CASE("linear attention: the component 'linear' has the softmax component's parameter names and shapes") {
  EncoderLayerOptions o{.d_model = 8, .n_heads = 2, .dropout = 0};
  Generator g1(4), g2(4);
  const auto linear = component<AttentionKind>("linear").make(o, g1, nullptr);
  const auto softmax = component<AttentionKind>("softmax").make(o, g2, nullptr);
  const NamedTensors a = linear->named_parameters(), b = softmax->named_parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].first == b[i].first);
    CHECK(a[i].second.shape() == b[i].second.shape());
  }
  linear->load_state_dict(softmax->state_dict());  // a softmax layer's state loads as is
  CHECK(component<AttentionKind>("linear").parameter_count(o) == 4 * 8 * 8 + 4 * 8);
}
