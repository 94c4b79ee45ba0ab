// Softmax attention's registration (the "softmax" attention variant, its settings) and its gradient checks:
// the op with masks, the layer with every combination of masks, positions and temperatures, and the flash path.
#include "autograd/ops/attention.h"
#include "autograd/ops/flash_attention.h"
#include "autograd/ops/indexing.h"
#include "nn/alibi.h"
#include "nn/attention.h"
#include "nn/components.h"
#include "nn/encoder.h"
#include "nn/module_gradcheck.h"
#include "nn/rope.h"

namespace tapegrad::nn {

namespace {

// Gradient checks, built from fixed seeds and converted to the check's dtype (float64 by default), dropout 0.
// Masks are fixed: the key-padding mask pads key 0 of batch 1, so with the causal mask query 0 of batch 1
// sees no key at all (a zero row, whose gradient must be zero too).
Tensor padding_mask_2x4() { return mask({0, 0, 0, 1, 1, 0, 0, 0}, {2, 4}); }

GradcheckCase mha_case(std::string name, MultiHeadAttentionOptions options, Shape query_shape, Shape memory_shape,
                       bool distinct_value, Tensor attn_mask, Tensor key_padding_mask) {
  const bool self = memory_shape.empty();
  std::vector<CheckedInput> inputs{{"query", query_shape}};
  if (!self) inputs.push_back({"key", memory_shape});
  if (!self && distinct_value) inputs.push_back({"value", memory_shape});
  return module_case<MultiHeadAttention>(
      std::move(name),
      [options](Generator& gen) { return std::make_unique<MultiHeadAttention>(options, gen, nullptr); }, inputs,
      [=](const MultiHeadAttention& layer, const std::vector<Tensor>& in) {
        const Tensor& key = self ? in[0] : in[1];
        const Tensor& value = self ? in[0] : distinct_value ? in[2] : in[1];
        return layer.forward(in[0], key, value, attn_mask, key_padding_mask).output;
      },
      211);
}

// The layer over kFlashAttentionMinKeys + 3 positions, where it runs as flash attention (blocks that do not
// divide T), through attend with a positional hook and the key padding mask: batch 1 ends in 5 pads.
GradcheckCase flash_layer_case(std::string name, bool causal, double temperature,
                               std::shared_ptr<const PositionalEncoding> positions) {
  const int64_t T = kFlashAttentionMinKeys + 3;
  std::vector<int> pads(static_cast<size_t>(2 * T), 0);
  for (int64_t j = T - 5; j < T; ++j) pads[T + j] = 1;
  const Tensor padding = mask(pads, {2, T});
  MultiHeadAttentionOptions options{4, 2};
  options.causal = causal;
  options.temperature = temperature;
  return module_case<MultiHeadAttention>(
      std::move(name),
      [options](Generator& gen) { return std::make_unique<MultiHeadAttention>(options, gen, nullptr); },
      {{"x", {2, T, 4}}},
      [padding, positions](const MultiHeadAttention& layer, const std::vector<Tensor>& in) {
        return layer.attend(in[0], {}, padding, false, positions.get()).output;
      },
      211);
}

// One initialiser runs every registration of this file when the library loads.
const bool registered = [] {
  register_component<AttentionKind>(
      {.name = "softmax",
       .help = "multi-head softmax(q kᵀ / √D) v (PyTorch's nn.MultiheadAttention)",
       .make = [](const EncoderLayerOptions& o, Generator& init,
                  std::shared_ptr<Generator> dropout_rng) -> std::unique_ptr<SelfAttention> {
         const VariantSettings settings = settings_of<AttentionKind>(o.settings, "softmax");
         return std::make_unique<MultiHeadAttention>(
             MultiHeadAttentionOptions{.d_model = o.d_model, .n_heads = o.n_heads, .dropout = o.dropout,
                                       .temperature = settings.real("temperature"), .causal = settings.flag("causal")},
             init, std::move(dropout_rng));
       },
       .parameter_count = [](const EncoderLayerOptions& o) { return QkvAttention::projection_parameters(o.d_model); },
       .settings = {causal_setting(),
                    // In [1e-3, 1e3]: outside it, scores of order 1 (q.k / sqrt(D)) make a softmax that is
                    // one-hot (e^-1000 underflows float32) or uniform to within 0.1%, blind to the queries.
                    {.name = "temperature", .type = SettingType::real, .default_value = 1.0, .min = 1e-3, .max = 1e3,
                     .help = "softmax temperature t: softmax(q k^T / (sqrt(D) * t))",
                     .old_key = "temperature"}}});
  register_gradchecks({
      op_case("nn/sdpa/causal-key-padding", {{{2, 2, 4, 3}}, {{2, 2, 4, 3}}, {{2, 2, 4, 3}}},
              [](const std::vector<Tensor>& in) {
                return scaled_dot_product_attention(in[0], in[1], in[2], causal_mask(4), padding_mask_2x4()).output;
              }),
      // Cross shapes (T_q 3, T_k 5, D_v 2) and an additive float mask, which is itself differentiated.
      op_case("nn/sdpa/cross-float-mask", {{{2, 3, 4}}, {{2, 5, 4}}, {{2, 5, 2}}, {{3, 5}}},
              [](const std::vector<Tensor>& in) {
                return scaled_dot_product_attention(in[0], in[1], in[2], in[3]).output;
              }),
      mha_case("nn/multi_head_attention/self-masked", {6, 2}, {2, 4, 6}, {}, false, causal_mask(4), padding_mask_2x4()),
      mha_case("nn/multi_head_attention/cross", {6, 3}, {2, 3, 6}, {2, 5, 6}, false, {},
               mask({0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, {2, 5})),
      mha_case("nn/multi_head_attention/cross-distinct-kv-no-bias", {4, 2, false}, {2, 2, 4}, {2, 3, 4}, true,
               mask({0, 0, 1, 0, 0, 0}, {2, 3}), {}),
      flash_layer_case("nn/multi_head_attention/flash-causal-rope-padding", true, 1.0,
                       std::make_shared<RotaryPositionalEncoding>(256)),
      flash_layer_case("nn/multi_head_attention/flash-alibi-temperature-padding", false, 0.8,
                       std::make_shared<AlibiPositionalEncoding>(256)),
  });
  return true;
}();

}  // namespace

}  // namespace tapegrad::nn
