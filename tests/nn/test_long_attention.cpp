// Long sequences in MultiHeadAttention: from kFlashAttentionMinKeys keys on, attention runs as flash
// attention wherever it can. Its outputs and gradients must equal the materialised path's (asking for the
// weights takes that path) for every mask and positional hook the model offers.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/alibi.h"
#include "nn/attention.h"
#include "nn/rope.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {

struct Run {
  Tensor output, dx, d_in_proj;
};

/// The layer on a fresh leaf copy of x, then backward with the cotangent r.
Run run(const MultiHeadAttention& mha, const Tensor& x_in, const Tensor& r, bool materialised, const Tensor& padding,
        const PositionalEncoding* positions) {
  for (const auto& named : mha.named_parameters()) named.second.zero_grad();
  Tensor x = x_in.detach().clone().requires_grad_();
  const AttentionResult result = mha.attend(x, {}, padding, materialised, positions);
  backward(result.output, r);
  Tensor d_in_proj;
  for (const auto& [name, p] : mha.named_parameters())
    if (name == "in_proj_weight") d_in_proj = p.grad().clone();
  return {result.output.detach(), x.grad(), d_in_proj};
}

}  // namespace

TEST_CASE("nn: attention over kFlashAttentionMinKeys or more keys (flash) equals the materialised path, every mask and hook (float32 within 3e-5)") {
  Generator gen(21);
  const int64_t B = 2, T = kFlashAttentionMinKeys + 37, C = 16, H = 2;
  const Tensor x = randn({B, T, C}, gen), r = randn({B, T, C}, gen);
  std::vector<int> pads(static_cast<size_t>(B * T), 0);
  for (int64_t j = T - 40; j < T; ++j) pads[T + j] = 1;  // batch 1 ends in 40 pads
  const Tensor padding = mask(pads, {B, T});
  const AlibiPositionalEncoding alibi(1024);
  const RotaryPositionalEncoding rope(1024);
  for (bool causal : {false, true})
    for (const PositionalEncoding* positions : std::vector<const PositionalEncoding*>{nullptr, &alibi, &rope})
      for (double temperature : {1.0, 0.7}) {
        INFO("causal " << causal << " positions " << (positions == &alibi ? "alibi" : positions ? "rope" : "none")
                       << " temperature " << temperature);
        MultiHeadAttentionOptions options{C, H};
        options.causal = causal;
        options.temperature = temperature;
        Generator init(5);
        const MultiHeadAttention mha(options, init, nullptr);
        const Run flash = run(mha, x, r, false, padding, positions), full = run(mha, x, r, true, padding, positions);
        CHECK(max_abs_diff(flash.output, full.output) < 3e-5);
        CHECK(max_abs_diff(flash.dx, full.dx) < 3e-5);
        CHECK(max_abs_diff(flash.d_in_proj, full.d_in_proj) < 3e-5);
      }
}

TEST_CASE("nn: attention over kFlashAttentionMinKeys or more keys with dropout in training drops, and is the identity's expectation") {
  Generator gen(22);
  const int64_t B = 1, T = kFlashAttentionMinKeys, C = 8, H = 2;
  MultiHeadAttentionOptions options{C, H};
  options.dropout = 0.5;
  Generator init(6);
  MultiHeadAttention mha(options, init, std::make_shared<Generator>(3));
  const Tensor x = randn({B, T, C}, gen);
  mha.eval();
  const Tensor evaluated = mha.attend(x, {}, {}, false).output;
  mha.train();
  const Tensor a = mha.attend(x, {}, {}, false).output, b = mha.attend(x, {}, {}, false).output;
  CHECK(max_abs_diff(a, b) > 1e-3);          // each call draws a new mask
  CHECK(max_abs_diff(a, evaluated) > 1e-3);  // and training differs from evaluation
}
