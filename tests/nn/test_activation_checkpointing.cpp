// Activation checkpointing of the encoder (TransformerEncoder::set_activation_checkpointing): the layers
// recomputed in backward must give the very numbers the stored activations give, dropout masks included,
// on the short attention paths and on flash attention, for less memory.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/attention.h"
#include "nn/encoder.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {

struct Pass {
  Tensor output, dx;
  std::vector<Tensor> dparams;
  uint64_t next_draw = 0;  // the dropout generator's next number after the step
  uint64_t peak_bytes = 0;  // of tensors, over forward and backward
};

/// One forward and backward of a freshly built encoder (seeded weights, seeded dropout stream) on x.
Pass run_encoder(const EncoderLayerOptions& options, int64_t layers, bool checkpointed, const Tensor& x_in,
                 const Tensor& padding) {
  Generator init(3);
  auto dropout_rng = std::make_shared<Generator>(17);
  TransformerEncoder encoder(layers, options, true, init, dropout_rng);
  encoder.set_activation_checkpointing(checkpointed);
  CHECK(encoder.activation_checkpointing() == checkpointed);
  encoder.train();
  Tensor x = x_in.detach().clone().requires_grad_();
  reset_peak_tensor_bytes();
  const uint64_t before = tensor_bytes().live;
  Pass pass;
  {
    const Tensor y = encoder.forward(x, {}, padding);
    Generator cotangent_gen(5);
    backward(y, randn(y.shape(), cotangent_gen));
    pass.output = y.detach();
  }
  pass.peak_bytes = tensor_bytes().peak - before;
  pass.dx = x.grad();
  for (const Tensor& p : encoder.parameters()) pass.dparams.push_back(p.grad());
  pass.next_draw = dropout_rng->next_u64();
  return pass;
}

void require_same(const Pass& a, const Pass& b) {
  CHECK(max_abs_diff(a.output, b.output) == 0);
  CHECK(max_abs_diff(a.dx, b.dx) == 0);
  REQUIRE(a.dparams.size() == b.dparams.size());
  for (size_t i = 0; i < a.dparams.size(); ++i) {
    INFO("parameter " << i);
    REQUIRE(a.dparams[i].defined() == b.dparams[i].defined());
    if (a.dparams[i].defined()) CHECK(max_abs_diff(a.dparams[i], b.dparams[i]) == 0);
  }
  CHECK(a.next_draw == b.next_draw);
}

}  // namespace

TEST_CASE("nn: a checkpointed encoder gives bit for bit the outputs and gradients of the plain one, dropout included") {
  for (const int64_t T : {int64_t{9}, kFlashAttentionMinKeys + 5}) {  // the fused attention, then flash attention
    for (const bool norm_first : {false, true}) {
      INFO("T " << T << (norm_first ? ", pre-LN" : ", post-LN"));
      EncoderLayerOptions options{16, 2, 32, 0.1, "gelu", norm_first};
      Generator gen(11);
      const Tensor x = randn({2, T, 16}, gen);
      std::vector<int> pads(static_cast<size_t>(2 * T), 0);
      for (int64_t t = T - 3; t < T; ++t) pads[static_cast<size_t>(T + t)] = 1;  // batch 1's last 3 positions
      const Tensor padding = mask(pads, {2, T});
      require_same(run_encoder(options, 3, true, x, padding), run_encoder(options, 3, false, x, padding));
    }
  }
}

TEST_CASE("nn: checkpointing an encoder keeps about one layer's activations instead of all of them") {
  EncoderLayerOptions options{64, 4, 256, 0.0, "relu", false};
  Generator gen(2);
  const Tensor x = randn({2, 512, 64}, gen);
  const Pass plain = run_encoder(options, 4, false, x, {}), checkpointed = run_encoder(options, 4, true, x, {});
  INFO("peak tensor bytes: plain " << plain.peak_bytes << ", checkpointed " << checkpointed.peak_bytes);
  // Four layers' activations against one layer's and three inputs: well under two thirds.
  CHECK(static_cast<double>(checkpointed.peak_bytes) < 0.6 * static_cast<double>(plain.peak_bytes));
}

TEST_CASE("nn: activation checkpointing is refused with one clear line for moe layers, whose auxiliary loss must be recorded") {
  EncoderLayerOptions options{8, 2, 16, 0.0};
  options.ffn = "moe";
  Generator init(1);
  TransformerEncoder encoder(2, options, false, init, nullptr);
  CHECK_THROWS_WITH(encoder.set_activation_checkpointing(true),
                    Catch::Contains("activation checkpointing") && Catch::Contains("moe") &&
                        Catch::Contains("auxiliary loss"));
  CHECK_FALSE(encoder.activation_checkpointing());
}

TEST_CASE("nn: a checkpointed encoder asked for attention weights or run without grad runs its layers as usual") {
  EncoderLayerOptions options{8, 2, 16, 0.0};
  Generator init(4), gen(6);
  TransformerEncoder encoder(3, options, false, init, nullptr);
  encoder.set_activation_checkpointing(true);
  const Tensor x = randn({1, 5, 8}, gen).requires_grad_();
  std::vector<Tensor> weights;
  const Tensor y = encoder.forward(x, {}, {}, &weights);
  REQUIRE(weights.size() == 3);
  for (const Tensor& w : weights) CHECK(w.requires_grad());  // recorded: a user may differentiate them
  {
    NoGradGuard no_grad;
    const size_t entries = Tape::current().size();
    const Tensor evaluated = encoder.forward(x);
    CHECK(Tape::current().size() == entries);  // nothing recorded, no checkpoint entry among it
    CHECK(max_abs_diff(evaluated, y.detach()) == 0);
  }
}
