// Scaled dot-product attention and multi-head attention: the formula by hand, masks (causal, key padding,
// fully masked rows), head splitting, cross-attention, PyTorch's parameters and numbers, gradient checks.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/autograd.h"
#include "support/nn_fixtures.h"
#include "nn/attention.h"

using namespace tapegrad;
using namespace tapegrad::nn;
using namespace tapegrad::testing;

namespace {





MultiHeadAttention make_mha(int64_t d_model, int64_t n_heads, uint64_t seed = 1, bool bias = true) {
  Generator gen(seed);
  return MultiHeadAttention({d_model, n_heads, bias}, gen, nullptr);
}

}  // namespace

TEST_CASE("nn: causal_mask is true exactly above the diagonal") {
  const Tensor m = causal_mask(4);
  REQUIRE(m.dtype() == DType::boolean);
  REQUIRE(m.shape() == Shape({4, 4}));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) CHECK(m.at({i, j}) == (j > i ? 1.0 : 0.0));
}

TEST_CASE("nn: scaled_dot_product_attention is softmax(q kᵀ / √d + mask) v") {
  Generator gen(7);
  const Tensor q = randn({2, 3, 2}, gen, DType::float64), k = randn({2, 4, 2}, gen, DType::float64),
               v = randn({2, 4, 3}, gen, DType::float64);
  const Tensor hidden = mask({0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, {3, 4});
  const AttentionResult r = scaled_dot_product_attention(q, k, v, hidden);
  REQUIRE(r.output.shape() == Shape({2, 3, 3}));
  REQUIRE(r.weights.shape() == Shape({2, 3, 4}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 3; ++i) {
      std::vector<double> p(4);
      double total = 0;
      for (int64_t j = 0; j < 4; ++j) {
        const double s = (q.at({b, i, 0}) * k.at({b, j, 0}) + q.at({b, i, 1}) * k.at({b, j, 1})) / std::sqrt(2.0);
        p[j] = hidden.at({i, j}) ? 0.0 : std::exp(s);
        total += p[j];
      }
      for (int64_t j = 0; j < 4; ++j) CHECK(r.weights.at({b, i, j}) == Approx(p[j] / total).margin(1e-14));
      for (int64_t c = 0; c < 3; ++c) {
        double o = 0;
        for (int64_t j = 0; j < 4; ++j) o += p[j] / total * v.at({b, j, c});
        CHECK(r.output.at({b, i, c}) == Approx(o).margin(1e-14));
      }
    }
  // An additive float mask of 0 / -inf is the same mask.
  std::vector<double> additive;
  for (double h : hidden.to_vector()) additive.push_back(h ? -INFINITY : 0.0);
  const AttentionResult f = scaled_dot_product_attention(q, k, v, tensor(additive, {3, 4}, DType::float64));
  CHECK(max_abs_diff(f.output, r.output) == 0);
}

TEST_CASE("nn: fully masked attention rows give zeros, never NaN, and no gradient") {
  Generator gen(11);
  const Tensor q = randn({2, 2, 3, 4}, gen, DType::float64).requires_grad_();
  const Tensor k = randn({2, 2, 3, 4}, gen, DType::float64).requires_grad_();
  const Tensor v = randn({2, 2, 3, 4}, gen, DType::float64).requires_grad_();
  // Batch 0: key 0 padded, so with the causal mask query 0 sees nothing. Batch 1: every key padded.
  const Tensor pad = mask({1, 0, 0, 1, 1, 1}, {2, 3});
  const AttentionResult r = scaled_dot_product_attention(q, k, v, causal_mask(3), pad);
  for (double w : r.output.to_vector()) REQUIRE(std::isfinite(w));
  for (double w : r.weights.to_vector()) REQUIRE(std::isfinite(w));
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t c = 0; c < 4; ++c) {
      CHECK(r.output.at({0, h, 0, c}) == 0.0);
      for (int64_t i = 0; i < 3; ++i) CHECK(r.output.at({1, h, i, c}) == 0.0);
    }
  CHECK(r.weights.at({0, 0, 1, 1}) == Approx(1.0));  // query 1 sees only key 1
  backward(r.output, randn(r.output.shape(), gen, DType::float64));
  for (const Tensor* t : {&q, &k, &v})
    for (double g : t->grad().to_vector()) REQUIRE(std::isfinite(g));
  for (double g : select(q.grad(), 0, 1).to_vector()) CHECK(g == 0.0);  // batch 1 attends to nothing
  for (double g : select(v.grad(), 0, 1).to_vector()) CHECK(g == 0.0);

  // Through the layer: a fully padded sequence gives out_proj's bias (zero at initialisation), no NaN.
  MultiHeadAttention mha = make_mha(4, 2);
  const Tensor x = randn({2, 3, 4}, gen);
  const Tensor out = mha.forward(x, x, x, {}, pad).output;
  for (double w : out.to_vector()) REQUIRE(std::isfinite(w));
  for (double w : select(out, 0, 1).to_vector()) CHECK(w == 0.0);
}

TEST_CASE("nn: causal self-attention: changing later tokens leaves earlier outputs exactly unchanged") {
  MultiHeadAttention mha = make_mha(8, 2, 3);
  Generator gen(5);
  const Tensor x = randn({2, 5, 8}, gen);
  const Tensor base = mha.forward(x, x, x, causal_mask(5)).output;
  for (int64_t i = 0; i < 5; ++i) {
    // Positions after i replaced by fresh values.
    const Tensor changed = concat({slice(x, 1, 0, i + 1), randn({2, 4 - i, 8}, gen)}, 1);
    const Tensor out = mha.forward(changed, changed, changed, causal_mask(5)).output;
    INFO("position " << i);
    CHECK(max_abs_diff(slice(out, 1, 0, i + 1), slice(base, 1, 0, i + 1)) == 0.0);
    if (i < 4) CHECK(max_abs_diff(slice(out, 1, i + 1, 5), slice(base, 1, i + 1, 5)) > 0.0);
  }
}

TEST_CASE("nn: key padding: changing padded positions leaves every non-pad output exactly unchanged") {
  MultiHeadAttention mha = make_mha(8, 4, 9);
  Generator gen(13);
  const Tensor x = randn({2, 5, 8}, gen);
  const Tensor pad = mask({0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 5});  // row 1: positions 3, 4 are pads
  const AttentionResult base = mha.forward(x, x, x, {}, pad, true);
  const Tensor changed = replace_positions(x, 1, 3, 5, gen);
  const AttentionResult out = mha.forward(changed, changed, changed, {}, pad, true);
  CHECK(max_abs_diff(select(out.output, 0, 0), select(base.output, 0, 0)) == 0.0);
  CHECK(max_abs_diff(slice(select(out.output, 0, 1), 0, 0, 3), slice(select(base.output, 0, 1), 0, 0, 3)) == 0.0);
  // The pad positions are still queries: their own outputs may change; as keys they get weight 0.
  CHECK(max_abs_diff(slice(select(out.output, 0, 1), 0, 3, 5), slice(select(base.output, 0, 1), 0, 3, 5)) > 0.0);
  for (double w : slice(select(out.weights, 0, 1), -1, 3, 5).to_vector()) CHECK(w == 0.0);
}

TEST_CASE("nn: one-head MultiHeadAttention is scaled dot-product attention with the same projections") {
  MultiHeadAttention mha = make_mha(4, 1);
  fill_deterministic(mha);  // nonzero biases, so the bias rows are checked too
  Generator gen(17);
  const Tensor x = randn({2, 3, 4}, gen, DType::float64);
  const Tensor W = mha.in_proj_weight, b = mha.in_proj_bias;
  auto project = [&](int64_t block) {
    return matmul(x, transpose(slice(W, 0, 4 * block, 4 * block + 4), 0, 1)) + slice(b, 0, 4 * block, 4 * block + 4);
  };
  const AttentionResult by_hand = scaled_dot_product_attention(project(0), project(1), project(2), causal_mask(3));
  const AttentionResult layer = mha.forward(x, x, x, causal_mask(3), {}, true);
  CHECK(max_abs_diff(layer.output, mha.out_proj().forward(by_hand.output)) < 1e-14);
  CHECK(max_abs_diff(select(layer.weights, 1, 0), by_hand.weights) < 1e-14);
}

TEST_CASE("nn: H heads are H attentions over column blocks of the projections, concatenated (weight splitting)") {
  const int64_t C = 6, H = 3, D = 2;
  MultiHeadAttention mha = make_mha(C, H);
  fill_deterministic(mha);
  Generator gen(19);
  const Tensor x = randn({2, 4, C}, gen, DType::float64);
  const Tensor W = mha.in_proj_weight, b = mha.in_proj_bias;
  std::vector<Tensor> heads;
  for (int64_t h = 0; h < H; ++h) {
    // Head h reads rows [h·D, (h+1)·D) of each of the q, k, v blocks: its own D-wide projection.
    auto project = [&](int64_t block) {
      const int64_t from = block * C + h * D;
      return matmul(x, transpose(slice(W, 0, from, from + D), 0, 1)) + slice(b, 0, from, from + D);
    };
    heads.push_back(scaled_dot_product_attention(project(0), project(1), project(2)).output);
  }
  const Tensor expected = mha.out_proj().forward(concat(heads, -1));
  CHECK(max_abs_diff(mha.forward(x, x, x).output, expected) < 1e-14);
}

TEST_CASE("nn: cross-attention (T_q != T_k): shapes, probabilities and gradients") {
  MultiHeadAttention mha = make_mha(8, 2, 23);
  Generator gen(29);
  const Tensor query = randn({2, 3, 8}, gen).requires_grad_();
  const Tensor memory = randn({2, 5, 8}, gen).requires_grad_();
  const Tensor pad = mask({0, 0, 0, 0, 1, 0, 0, 1, 1, 1}, {2, 5});
  const AttentionResult r = mha.forward(query, memory, memory, {}, pad, true);
  REQUIRE(r.output.shape() == Shape({2, 3, 8}));
  REQUIRE(r.weights.shape() == Shape({2, 2, 3, 5}));
  const Tensor row_sums = sum(r.weights, -1);
  for (double s : row_sums.to_vector()) CHECK(s == Approx(1.0).margin(1e-6));
  backward(r.output, randn(r.output.shape(), gen));
  CHECK(query.grad().shape() == query.shape());
  CHECK(memory.grad().shape() == memory.shape());
  for (const auto& [name, param] : mha.named_parameters()) {
    INFO(name);
    REQUIRE(param.grad().defined());
    CHECK(param.grad().shape() == param.shape());
  }
  // Padded memory positions are neither keys nor values of anything: no gradient reaches them.
  for (double g : slice(select(memory.grad(), 0, 1), 0, 2, 5).to_vector()) CHECK(g == 0.0);
  for (double g : select(select(memory.grad(), 0, 0), 0, 4).to_vector()) CHECK(g == 0.0);
}

// The numbers below come from PyTorch 1.13 (/usr/bin/python3, python3-torch), float64, with this script:
//   import math, torch, torch.nn as nn; torch.set_default_dtype(torch.float64)
//   def fill(m):  # parameter p (state order), element j (row-major)
//       with torch.no_grad():
//           for p, (_, t) in enumerate(m.named_parameters()):
//               values = [0.5 * math.sin(0.7 * j + 1.3 * p + 0.1) for j in range(t.numel())]
//               t.copy_(torch.tensor(values).view(t.shape))
//   def inputs(*shape, phase=0.5):
//       return torch.tensor([math.sin(0.37 * j + phase) for j in range(math.prod(shape))]).view(*shape)
//   causal = torch.triu(torch.ones(4, 4, dtype=torch.bool), 1)
//   kpm = torch.tensor([[0, 0, 0, 1], [0, 0, 1, 1]], dtype=torch.bool)
//   mha = nn.MultiheadAttention(6, 2, batch_first=True); fill(mha); x = inputs(2, 4, 6)
//   out, w = mha(x, x, x, key_padding_mask=kpm, attn_mask=causal, need_weights=True,
//                average_attn_weights=False)
//   mha = nn.MultiheadAttention(6, 3, batch_first=True); fill(mha)
//   q = inputs(2, 3, 6); mem = inputs(2, 5, 6, phase=1.5)
//   kpm5 = torch.tensor([[0, 0, 0, 0, 1], [0, 0, 1, 1, 1]], dtype=torch.bool)
//   out, w = mha(q, mem, mem, key_padding_mask=kpm5, need_weights=True, average_attn_weights=False)
// each printed flat with "%.12g".
TEST_CASE("nn: MultiHeadAttention gives PyTorch's numbers for the same weights (self and cross, masked)") {
  // clang-format off
  const std::vector<double> kMhaSelfOutput = {
      0.141902655387, -0.693804104473, -0.716619404133, 0.426565906501, 0.0697295936081, 0.125225871447,
      0.019792909689, -1.45545410306, 0.152304649326, 0.336217064823, -0.710605465195, 0.980710126824,
      -0.14747731482, -1.16071966006, 0.0305813736334, 0.160834928061, -0.416916208667, 0.868123591338,
      0.103047556548, -0.852324174126, -0.5223319462, 0.394582918748, -0.093197852636, 0.316962746429,
      -0.0954289792936, -1.65247635704, 0.460711122426, 0.230840097185, -0.915687540886, 1.2871745082,
      -0.141335946968, -1.11401741539, -0.0213525558808, 0.165055025268, -0.369120175799, 0.817038449469,
      -0.0826210789935, -1.44800462567, 0.247414264204, 0.235510551621, -0.706970164319, 1.07785214884,
      -0.0834720630276, -1.54164620102, 0.340082839527, 0.238288583274, -0.802362659801, 1.16860852356};
  const std::vector<double> kMhaSelfWeights = {
      1, 0, 0, 0,
      0.124607030965, 0.875392969035, 0, 0,
      0.171001236491, 0.0556465717308, 0.773352191778, 0,
      0.794766882507, 0.124326410495, 0.0809067069979, 0,
      1, 0, 0, 0,
      0.109704832089, 0.890295167911, 0, 0,
      0.190333418254, 0.0718252688104, 0.737841312935, 0,
      0.788603540041, 0.142816209004, 0.0685802509553, 0,
      1, 0, 0, 0,
      0.0603471760603, 0.93965282394, 0, 0,
      0.59641341364, 0.40358658636, 0, 0,
      0.77348804185, 0.22651195815, 0, 0,
      1, 0, 0, 0,
      0.077296406517, 0.922703593483, 0, 0,
      0.658169540824, 0.341830459176, 0, 0,
      0.816135273963, 0.183864726037, 0, 0};
  const std::vector<double> kMhaCrossOutput = {
      0.0767222086643, -1.08611410928, -0.266770507052, 0.377789331788, -0.332292816311, 0.568194119928,
      0.389353211621, -1.10932640534, -0.556641351349, 0.68522626426, -0.343870538062, 0.272109394206,
      -0.271642060395, -0.691871265356, -0.304969878937, 0.0210017987298, 0.0557444535771, 0.544502711694,
      0.16543340384, -1.11990167815, -0.322352259705, 0.466076012064, -0.36327806443, 0.510289146036,
      0.0223251833804, -0.964233431465, -0.331880124196, 0.319750042724, -0.210274420114, 0.506591730716,
      -0.123532919711, -0.573998245893, -0.568656066293, 0.161678792845, 0.181493803575, 0.280525758353};
  const std::vector<double> kMhaCrossWeights = {
      0.413442355501, 0.0428144426221, 0.260270215012, 0.283472986866, 0,
      0.351380121108, 0.151933459865, 0.138365455639, 0.358320963388, 0,
      0.0419544275048, 0.304775680557, 0.617069115051, 0.0362007768877, 0,
      0.344928685623, 0.0420540078813, 0.397354719493, 0.215662587003, 0,
      0.121834657975, 0.621969652495, 0.0483276945245, 0.207867995005, 0,
      0.115704796912, 0.476812521344, 0.277955904038, 0.129526777705, 0,
      0.28345005143, 0.057007594488, 0.47782211251, 0.181720241571, 0,
      0.318629480552, 0.169967113772, 0.0217828141603, 0.489620591516, 0,
      0.103874759249, 0.103001137804, 0.724033998089, 0.0690901048579, 0,
      0.546304790838, 0.453695209162, 0, 0, 0,
      0.438520566681, 0.561479433319, 0, 0, 0,
      0.905625178725, 0.0943748212754, 0, 0, 0,
      0.718700493242, 0.281299506758, 0, 0, 0,
      0.093323595672, 0.906676404328, 0, 0, 0,
      0.714851858552, 0.285148141448, 0, 0, 0,
      0.618033036465, 0.381966963535, 0, 0, 0,
      0.0713184325876, 0.928681567412, 0, 0, 0,
      0.955494455509, 0.0445055444914, 0, 0, 0};
  // clang-format on
  {
    MultiHeadAttention mha = make_mha(6, 2);
    fill_deterministic(mha);
    const Tensor x = sine_input({2, 4, 6});
    const AttentionResult r = mha.forward(x, x, x, causal_mask(4), mask({0, 0, 0, 1, 0, 0, 1, 1}, {2, 4}), true);
    CHECK(max_abs_diff(r.output, tensor(kMhaSelfOutput, {2, 4, 6}, DType::float64)) < 1e-10);
    CHECK(max_abs_diff(r.weights, tensor(kMhaSelfWeights, {2, 2, 4, 4}, DType::float64)) < 1e-10);
  }
  {
    MultiHeadAttention mha = make_mha(6, 3);
    fill_deterministic(mha);
    const Tensor q = sine_input({2, 3, 6}), memory = sine_input({2, 5, 6}, 1.5);
    const AttentionResult r = mha.forward(q, memory, memory, {}, mask({0, 0, 0, 0, 1, 0, 0, 1, 1, 1}, {2, 5}), true);
    CHECK(max_abs_diff(r.output, tensor(kMhaCrossOutput, {2, 3, 6}, DType::float64)) < 1e-10);
    CHECK(max_abs_diff(r.weights, tensor(kMhaCrossWeights, {2, 3, 3, 5}, DType::float64)) < 1e-10);
  }
}

TEST_CASE("nn: MultiHeadAttention has PyTorch's parameter names, shapes and initialisation") {
  MultiHeadAttention mha = make_mha(8, 2);
  const NamedTensors params = mha.named_parameters();
  REQUIRE(params.size() == 4);
  CHECK(params[0].first == "in_proj_weight");
  CHECK(params[0].second.shape() == Shape({24, 8}));
  CHECK(params[1].first == "in_proj_bias");
  CHECK(params[1].second.shape() == Shape({24}));
  CHECK(params[2].first == "out_proj.weight");
  CHECK(params[2].second.shape() == Shape({8, 8}));
  CHECK(params[3].first == "out_proj.bias");
  CHECK(params[3].second.shape() == Shape({8}));
  const double xavier = std::sqrt(6.0 / (8 + 24));  // fan_in 8, fan_out 24
  double largest = 0;
  for (double w : mha.in_proj_weight.to_vector()) largest = std::max(largest, std::fabs(w));
  CHECK(largest <= xavier);
  CHECK(largest > 0.8 * xavier);
  for (double w : mha.in_proj_bias.to_vector()) CHECK(w == 0.0);
  for (double w : mha.out_proj().bias.to_vector()) CHECK(w == 0.0);

  MultiHeadAttention no_bias = make_mha(8, 2, 1, false);
  REQUIRE(no_bias.named_parameters().size() == 2);
  CHECK(!no_bias.in_proj_bias.defined());
  CHECK(!no_bias.out_proj().bias.defined());

  // 4·768² + 4·768 = 2,362,368, as nn.MultiheadAttention(768, 12).
  CHECK(make_mha(768, 12).parameter_count() == 2362368);
}

TEST_CASE("nn: MultiHeadAttention rejects d_model % n_heads != 0 and misshapen inputs") {
  Generator gen(1);
  try {
    MultiHeadAttention bad({10, 3}, gen, nullptr);
    FAIL("no error");
  } catch (const ValueError& e) {
    const std::string message = e.what();
    CHECK(message.find("10") != std::string::npos);
    CHECK(message.find("3") != std::string::npos);
  }
  CHECK_THROWS_AS(MultiHeadAttention({8, 2, true, 0.1}, gen, nullptr), ValueError);  // dropout needs a generator
  MultiHeadAttention mha = make_mha(8, 2);
  const Tensor x = randn({2, 3, 8}, gen), memory = randn({2, 4, 8}, gen);
  CHECK_THROWS_AS(mha.forward(randn({2, 3, 6}, gen), x, x), ShapeError);
  CHECK_THROWS_AS(mha.forward(x, memory, x), ShapeError);                       // key and value differ
  CHECK_THROWS_AS(mha.forward(x, memory, memory, causal_mask(3)), ShapeError);  // mask must be (T_q, T_k)
  CHECK_THROWS_AS(mha.forward(x, x, x, {}, mask({0, 0, 0, 0}, {2, 2})), ShapeError);
  CHECK_THROWS_AS(mha.forward(x, x, x, ids({0, 1, 2, 3, 4, 5, 6, 7, 8}, {3, 3})), DTypeError);
  CHECK_NOTHROW(mha.forward(x, memory, memory, mask(std::vector<int>(12), {3, 4})));
  // A 3-D mask is (B·H, T_q, T_k), PyTorch's layout; hiding everything but key 0 for every head.
  std::vector<int> all_but_first(2 * 2 * 3 * 4, 1);
  for (size_t i = 0; i < all_but_first.size(); i += 4) all_but_first[i] = 0;
  const AttentionResult r = mha.forward(x, memory, memory, mask(all_but_first, {4, 3, 4}), {}, true);
  for (double w : select(r.weights, -1, 0).to_vector()) CHECK(w == 1.0);
}

TEST_CASE("nn: attention dropout: the returned weights are after dropout (as PyTorch's), and eval is deterministic") {
  Generator gen(31);
  auto rng = std::make_shared<Generator>(37);
  MultiHeadAttention mha({8, 2, true, 0.5}, gen, rng);
  const Tensor x = randn({2, 4, 8}, gen);
  const AttentionResult trained = mha.forward(x, x, x, {}, {}, true);
  int64_t dropped = 0;  // dropout at 0.5 zeroes some probabilities and doubles the rest
  for (double w : trained.weights.to_vector()) dropped += w == 0.0;
  CHECK(dropped > 0);
  CHECK(trained.weights.to_vector().size() == 2 * 2 * 4 * 4);
  mha.eval();
  const Tensor a = mha.forward(x, x, x).output, b = mha.forward(x, x, x).output;
  CHECK(max_abs_diff(a, b) == 0.0);
  CHECK(max_abs_diff(a, trained.output) > 1e-3);
  // Training draws its masks from the shared stream: the same state gives the same output.
  mha.train();
  rng->reseed(41);
  const Tensor first = mha.forward(x, x, x).output;
  rng->reseed(41);
  CHECK(max_abs_diff(mha.forward(x, x, x).output, first) == 0.0);
}

// The fused self-attention path (autograd/ops/attention.cpp) against the composed one (split heads,
// scaled_dot_product_attention, merge), which MultiHeadAttention takes when the weights are wanted under
// grad: outputs, weights and every gradient agree in float64, with masks, and on 1 and 2 threads alike.
TEST_CASE("nn: fused self-attention equals the composed path, values and gradients, on 1 and 2 threads") {
  Generator gen(907);
  // Both backward paths: T 64 keeps the attention weights (512 KiB in float64), T 256 recomputes them
  // (8 MiB); the heads are shared between threads in both (autograd/parallel.h's grain).
  for (const auto& [B, T, C] : {std::tuple<int64_t, int64_t, int64_t>{4, 64, 128}, {4, 256, 64}}) {
    CHECK((B * 4 * T * T * 8 < kKeptAttentionWeightsBytes) == (T == 64));
    MultiHeadAttention layer({C, 4}, gen, nullptr);
    layer.to(DType::float64);
    const Tensor x = randn({B, T, C}, gen, DType::float64).requires_grad_();
    const Tensor cotangent = randn({B, T, C}, gen, DType::float64);
    std::vector<int> pads(B * T);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = T - 5 * b; t < T; ++t) pads[b * T + t] = 1;  // batch b: its last 5·b keys are padding
    const Tensor padding = mask(pads, {B, T});
    const Tensor causal = causal_mask(T);
    auto run = [&](bool composed, int threads) {
      set_num_threads(threads);
      for (auto& [name, p] : layer.named_parameters()) p.zero_grad();
      x.zero_grad();
      AttentionResult r = layer.forward(x, x, x, causal, padding, /*need_weights=*/composed);
      backward(r.output, cotangent);
      std::vector<Tensor> grads{r.output.detach(), x.grad().clone()};
      for (auto& [name, p] : layer.named_parameters()) grads.push_back(p.grad().clone());
      if (composed) grads.push_back(r.weights.detach());
      return grads;
    };
    const std::vector<Tensor> composed = run(true, 1), fused1 = run(false, 1), fused2 = run(false, 2);
    set_num_threads(0);
    for (size_t i = 0; i + 1 < composed.size(); ++i) {
      INFO("tensor " << i << " (0: output, 1: dx, then the parameters' gradients)");
      CHECK(max_abs_diff(composed[i], fused1[i]) < 1e-12);
      // Within rounding, not bit for bit: a weight's gradient sums the batch's rows in one part a thread
      // (kernels/gemm.cpp: split along the depth), and the products of x and dx are split by rows, whose
      // parts OpenBLAS may multiply with another kernel by their size (on Zen 4 its Cooperlake dgemm gave dx
      // 1e-17 apart on 2 threads; OPENBLAS_CORETYPE=Haswell, equal). docs/reliability.md promises no more.
      CHECK(max_abs_diff(fused1[i], fused2[i]) < 1e-12);
    }
    NoGradGuard no_grad;
    const Tensor fused_weights = layer.forward(x, x, x, causal, padding, true).weights;
    CHECK(max_abs_diff(fused_weights, composed.back()) < 1e-12);
  }
}
