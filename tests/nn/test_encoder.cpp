// TransformerEncoderLayer and TransformerEncoder: post-LN and pre-LN against their formulas written out
// from the same submodules, PyTorch's names and numbers, masks, dropout, gradient checks.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autograd.h"
#include "support/nn_fixtures.h"
#include "nn/attention.h"
#include "nn/encoder.h"
#include "nn/feed_forward.h"
#include "nn/layernorm.h"

using namespace tapegrad;
using namespace tapegrad::nn;
using namespace tapegrad::testing;

namespace {

// The built-in components a layer holds by default, seen through their own classes.
const MultiHeadAttention& attention(const TransformerEncoderLayer& layer) {
  return dynamic_cast<const MultiHeadAttention&>(layer.self_attn());
}
const FeedForward& feed_forward(const TransformerEncoderLayer& layer) {
  return dynamic_cast<const FeedForward&>(layer.feed_forward());
}
const LayerNorm& layer_norm(const Norm& norm) { return dynamic_cast<const LayerNorm&>(norm); }

std::vector<std::pair<std::string, std::vector<int64_t>>> names_and_shapes(const Module& m) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const auto& [name, t] : m.named_parameters()) out.emplace_back(name, t.shape().vec());
  return out;
}

EncoderLayerOptions small_layer(bool norm_first, const std::string& activation, double dropout = 0.0) {
  EncoderLayerOptions o{8, 2};
  o.d_ff = 16;
  o.dropout = dropout;
  o.activation = activation;
  o.norm_first = norm_first;
  return o;
}

}  // namespace

TEST_CASE("nn: post-LN encoder layer equals norm2(h + ff(h)), h = norm1(x + sa(x)), from its own submodules") {
  Generator gen(3);
  TransformerEncoderLayer layer(small_layer(false, "relu"), gen, nullptr);
  layer.to(DType::float64);
  const Tensor x = randn({2, 5, 8}, gen, DType::float64);
  const Tensor pad = mask({0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 5});
  const Tensor sa = attention(layer).forward(x, x, x, {}, pad).output;
  const Tensor h = layer.norm1().forward(x + sa);
  const Tensor ff = feed_forward(layer).linear2().forward(relu(feed_forward(layer).linear1().forward(h)));
  const Tensor expected = layer.norm2().forward(h + ff);
  CHECK(max_abs_diff(layer.forward(x, {}, pad), expected) < 1e-14);
}

TEST_CASE("nn: pre-LN encoder layer equals h + ff(norm2(h)), h = x + sa(norm1(x)), from its own submodules") {
  Generator gen(4);
  TransformerEncoderLayer layer(small_layer(true, "gelu"), gen, nullptr);
  layer.to(DType::float64);
  const Tensor x = randn({2, 5, 8}, gen, DType::float64);
  const Tensor causal = causal_mask(5);
  const Tensor n1 = layer.norm1().forward(x);
  const Tensor h = x + attention(layer).forward(n1, n1, n1, causal).output;
  const Tensor expected = h + feed_forward(layer).linear2().forward(gelu(feed_forward(layer).linear1().forward(layer.norm2().forward(h))));
  CHECK(max_abs_diff(layer.forward(x, causal), expected) < 1e-14);
}

TEST_CASE("nn: encoder layer registers PyTorch's children and parameters in PyTorch's order") {
  Generator gen(5);
  TransformerEncoderLayer layer(small_layer(false, "relu", 0.1), gen, std::make_shared<Generator>(6));
  std::vector<std::string> children;
  for (const auto& [name, _] : layer.named_children()) children.push_back(name);
  // [n for n, _ in nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).named_children()] in PyTorch 1.13
  CHECK(children == std::vector<std::string>{"self_attn", "linear1", "dropout", "linear2", "norm1", "norm2", "dropout1",
                                             "dropout2"});
  // [(k, list(v.shape)) for k, v in layer.state_dict().items()], the same layer, PyTorch 1.13
  const std::vector<std::pair<std::string, std::vector<int64_t>>> pytorch = {
      {"self_attn.in_proj_weight", {24, 8}},
      {"self_attn.in_proj_bias", {24}},
      {"self_attn.out_proj.weight", {8, 8}},
      {"self_attn.out_proj.bias", {8}},
      {"linear1.weight", {16, 8}},
      {"linear1.bias", {16}},
      {"linear2.weight", {8, 16}},
      {"linear2.bias", {8}},
      {"norm1.weight", {8}},
      {"norm1.bias", {8}},
      {"norm2.weight", {8}},
      {"norm2.bias", {8}},
  };
  CHECK(names_and_shapes(layer) == pytorch);
  CHECK(attention(layer).options().dropout == 0.1);  // PyTorch passes the layer's dropout to self_attn
  for (double w : layer_norm(layer.norm1()).weight.to_vector()) CHECK(w == 1.0);
}

TEST_CASE("nn: TransformerEncoder names its layers layers.{i} and its final norm norm") {
  Generator gen(7);
  const EncoderLayerOptions options = small_layer(true, "gelu");
  TransformerEncoder with_norm(3, options, true, gen, nullptr);
  TransformerEncoder without_norm(2, options, false, gen, nullptr);
  REQUIRE(with_norm.n_layers() == 3);
  REQUIRE(with_norm.norm() != nullptr);
  CHECK(without_norm.norm() == nullptr);
  const NamedTensors params = with_norm.named_parameters();
  REQUIRE(params.size() == 3 * 12 + 2);
  CHECK(params[0].first == "layers.0.self_attn.in_proj_weight");
  CHECK(params[12].first == "layers.1.self_attn.in_proj_weight");
  CHECK(params[35].first == "layers.2.norm2.bias");
  CHECK(params[36].first == "norm.weight");
  CHECK(params[37].first == "norm.bias");
  CHECK(without_norm.named_parameters().back().first == "layers.1.norm2.bias");
  const int64_t per_layer = with_norm.layer(0).parameter_count();
  CHECK(per_layer == (3 * 64 + 24) + (64 + 8) + (128 + 16) + (128 + 8) + 4 * 8);
  CHECK(with_norm.parameter_count() == 3 * per_layer + 16);
  // Each layer draws its own initial weights (PyTorch deep-copies one layer instead).
  CHECK(max_abs_diff(feed_forward(with_norm.layer(0)).linear1().weight, feed_forward(with_norm.layer(1)).linear1().weight) > 0);
}

// Numbers from PyTorch 1.13 (/usr/bin/python3, python3-torch), float64, with the fill() and inputs() of the
// script in test_attention.cpp and
//   kpm = torch.tensor([[0, 0, 0, 1], [0, 0, 1, 1]], dtype=torch.bool)
//   for name, first, act, heads in (("kPostReluOutput", False, "relu", 2), ("kPreGeluOutput", True, "gelu", 3)):
//       layer = nn.TransformerEncoderLayer(6, heads, dim_feedforward=8, dropout=0.0, activation=act,
//                                          batch_first=True, norm_first=first)
//       fill(layer); print(layer(inputs(2, 4, 6), src_key_padding_mask=kpm))   # flat, "%.12g"
// (with grad enabled, so PyTorch takes its ordinary path, not the inference fast path).
TEST_CASE("nn: encoder layers give PyTorch's numbers for the same weights (post-LN/ReLU, pre-LN/GELU)") {
  const std::vector<double> kPostReluOutput = {
      0.0775573092314, 1.10395793921,  0.171727518323,  -0.351066902479, -0.48182234485,  -0.230604440827,
      0.0540075677603, 0.937863516979, 0.0078688532647, -0.22763659753,  -0.418369955862, -0.601306486762,
      0.199206662556,  0.882026348066, -0.316597194718, -0.463944708496, -0.439112970333, -0.988868435036,
      0.0706196423681, 1.00514252364,  0.244316339201,  -0.262749536253, -0.476739641086, -0.141687882897,
      0.106532584827,  0.95914697262,  -0.118615325588, -0.276189960897, -0.406454513838, -0.734973449054,
      0.214415204532,  0.91388651596,  -0.344618054686, -0.477012165191, -0.442072956823, -0.971487000713,
      0.164866807465,  1.09491491204,  -0.190055563104, -0.244854784368, -0.40160078702,  -0.562858996084,
      0.119804415976,  0.941817878235, -0.158246060185, -0.31907570795,  -0.410458865171, -0.814249485497};
  const std::vector<double> kPreGeluOutput = {
      0.692566619344,  0.0349455096679, 0.775780846021,  1.32045414907,   0.598483222772,  1.03854512971,
      0.550130882803,  -0.679091247636, -0.431403986828, -0.234585343131, -1.09841779093,  -0.617583058449,
      -0.794397838486, -1.5476477057,   -0.702072743158, 0.133248356682,  -0.136700267059, 0.829655129326,
      0.984069855385,  0.219758460631,  0.82275622616,   1.22565950923,   0.383258138149,  0.727741673392,
      0.192017370021,  -1.01600534978,  -0.767869156814, -0.474905593963, -1.20062632896,  -0.62956716949,
      -0.642880686539, -1.25874937389,  -0.385760942264, 0.49520134758,   0.237436419499,  1.0951378645,
      1.14606204396,   0.293500151174,  0.722395115505,  1.0195586026,    0.116205122575,  0.353198274977,
      -0.168434992504, -1.33380688373,  -1.00260480836,  -0.598226769085, -1.19138972348,  -0.48556831979};
  const Tensor pad = mask({0, 0, 0, 1, 0, 0, 1, 1}, {2, 4});
  const Tensor x = sine_input({2, 4, 6});
  Generator gen(1);
  {
    TransformerEncoderLayer layer({6, 2, 8, 0.0, "relu", false}, gen, nullptr);
    fill_deterministic(layer);
    CHECK(max_abs_diff(layer.forward(x, {}, pad), tensor(kPostReluOutput, {2, 4, 6}, DType::float64)) < 1e-10);
  }
  {
    TransformerEncoderLayer layer({6, 3, 8, 0.0, "gelu", true}, gen, nullptr);
    fill_deterministic(layer);
    CHECK(max_abs_diff(layer.forward(x, {}, pad), tensor(kPreGeluOutput, {2, 4, 6}, DType::float64)) < 1e-10);
  }
}

TEST_CASE("nn: encoder: pad positions and later positions never reach the outputs they must not") {
  Generator gen(9);
  TransformerEncoder encoder(2, small_layer(false, "relu"), true, gen, nullptr);
  const Tensor x = randn({2, 5, 8}, gen);
  SECTION("changing pad positions leaves every non-pad output exactly unchanged") {
    const Tensor pad = mask({0, 0, 0, 0, 1, 0, 0, 1, 1, 1}, {2, 5});
    const Tensor base = encoder.forward(x, {}, pad);
    const Tensor changed = replace_positions(replace_positions(x, 0, 4, 5, gen), 1, 2, 5, gen);
    const Tensor out = encoder.forward(changed, {}, pad);
    CHECK(max_abs_diff(slice(select(out, 0, 0), 0, 0, 4), slice(select(base, 0, 0), 0, 0, 4)) == 0.0);
    CHECK(max_abs_diff(slice(select(out, 0, 1), 0, 0, 2), slice(select(base, 0, 1), 0, 0, 2)) == 0.0);
  }
  SECTION("with the causal mask, changing positions after i leaves positions <= i exactly unchanged") {
    const Tensor base = encoder.forward(x, causal_mask(5));
    for (int64_t i = 0; i < 4; ++i) {
      const Tensor changed = replace_positions(replace_positions(x, 0, i + 1, 5, gen), 1, i + 1, 5, gen);
      const Tensor out = encoder.forward(changed, causal_mask(5));
      INFO("position " << i);
      CHECK(max_abs_diff(slice(out, 1, 0, i + 1), slice(base, 1, 0, i + 1)) == 0.0);
      CHECK(max_abs_diff(slice(out, 1, i + 1, 5), slice(base, 1, i + 1, 5)) > 0.0);
    }
  }
}

TEST_CASE("nn: encoder appends one per-head attention weights tensor per layer") {
  Generator gen(10);
  TransformerEncoder encoder(3, small_layer(true, "relu"), false, gen, nullptr);
  const Tensor x = randn({2, 4, 8}, gen);
  std::vector<Tensor> weights;
  const Tensor out = encoder.forward(x, {}, mask({0, 0, 0, 1, 0, 0, 0, 0}, {2, 4}), &weights);
  CHECK(out.shape() == Shape({2, 4, 8}));
  REQUIRE(weights.size() == 3);
  for (const Tensor& w : weights) {
    CHECK(w.shape() == Shape({2, 2, 4, 4}));
    for (double p : select(select(select(w, 0, 0), 0, 1), -1, 3).to_vector()) CHECK(p == 0.0);  // padded key 3
  }
  // Without a destination nothing is collected, and the output is the same.
  CHECK(max_abs_diff(encoder.forward(x, {}, mask({0, 0, 0, 1, 0, 0, 0, 0}, {2, 4})), out) == 0.0);
}

TEST_CASE("nn: encoder dropout: training draws from the shared generator, evaluation is the identity") {
  Generator gen(11);
  auto rng = std::make_shared<Generator>(12);
  TransformerEncoder encoder(2, small_layer(false, "gelu", 0.2), false, gen, rng);
  const Tensor x = randn({2, 4, 8}, gen);
  rng->reseed(99);
  const Tensor first = encoder.forward(x);
  rng->reseed(99);
  CHECK(max_abs_diff(encoder.forward(x), first) == 0.0);
  CHECK(max_abs_diff(encoder.forward(x), first) > 0.0);  // the stream moved on: other masks
  encoder.eval();
  const Tensor evaluated = encoder.forward(x);
  CHECK(max_abs_diff(encoder.forward(x), evaluated) == 0.0);
  CHECK(max_abs_diff(evaluated, first) > 0.0);
  CHECK_FALSE(encoder.layer(1).dropout2().is_training());
}

TEST_CASE("nn: encoder layer rejects bad options and misshapen inputs") {
  Generator gen(13);
  CHECK_THROWS_AS(TransformerEncoderLayer({8, 3}, gen, nullptr), ValueError);  // 8 % 3 != 0
  EncoderLayerOptions no_ff{8, 2};
  no_ff.d_ff = 0;
  CHECK_THROWS_AS(TransformerEncoderLayer(no_ff, gen, nullptr), ValueError);
  CHECK_THROWS_AS(TransformerEncoderLayer(EncoderLayerOptions{8, 2}, gen, nullptr), ValueError);  // dropout 0.1, no rng
  CHECK_THROWS_AS(TransformerEncoder(-1, small_layer(false, "relu"), false, gen, nullptr), ValueError);
  TransformerEncoderLayer layer(small_layer(false, "relu"), gen, nullptr);
  CHECK_THROWS_AS(layer.forward(randn({2, 4, 6}, gen)), ShapeError);
  CHECK_THROWS_AS(layer.forward(randn({4, 8}, gen)), ShapeError);
  CHECK_THROWS_AS(layer.forward(randn({2, 4, 8}, gen), causal_mask(3)), ShapeError);
}

