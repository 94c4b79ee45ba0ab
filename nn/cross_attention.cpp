#include "nn/cross_attention.h"

#include <utility>

#include "autograd/ops/elementwise.h"
#include "nn/module_gradcheck.h"

namespace tapegrad::nn {

CrossAttentionLayer::CrossAttentionLayer(const CrossAttentionOptions& options, Generator& gen,
                                         std::shared_ptr<Generator> dropout_rng)
    : options_(options) {
  multihead_attn_ = &register_module(
      "multihead_attn", std::make_unique<MultiHeadAttention>(
                            MultiHeadAttentionOptions{options.d_model, options.n_heads, true, options.dropout}, gen,
                            dropout_rng));
  norm_ = &register_module("norm", component<NormKind>(options.norm).make(
                                       options.d_model, settings_of<NormKind>(options.settings, options.norm), gen));
  dropout_ = &register_module("dropout", std::make_unique<Dropout>(options.dropout, std::move(dropout_rng)));
}

Tensor CrossAttentionLayer::forward(const Tensor& x, const Tensor& memory, const Tensor& memory_key_padding_mask,
                                    const Tensor& attn_mask) const {
  const ScopeName scope = enter_scope();
  const int64_t C = options_.d_model;
  if (x.dim() != 3 || memory.dim() != 3 || x.size(-1) != C || memory.size(-1) != C || memory.size(0) != x.size(0))
    throw ShapeError(cat("CrossAttentionLayer: x ", x.shape(), " and memory ", memory.shape(),
                         " must be (B, T_q, C) and (B, T_k, C) with one B and C = d_model = ", C));
  // The memory is passed as key and value alike: MultiHeadAttention projects both in one product.
  const auto attend = [&](const Tensor& queries) {
    return dropout_->forward(multihead_attn_->forward(queries, memory, memory, attn_mask, memory_key_padding_mask).output);
  };
  if (options_.norm_first) return x + attend(norm_->forward(x));
  return norm_->forward(x + attend(x));
}

namespace {

// Gradient checks over x, the memory and every named parameter, from a fixed seed, dropout 0: 3 queries
// over 5 memory positions, the memory of batch 1 padded at its last two positions.
GradcheckCase cross_case(std::string name, bool norm_first) {
  return module_case<CrossAttentionLayer>(
      std::move(name),
      [norm_first](Generator& gen) {
        return std::make_unique<CrossAttentionLayer>(CrossAttentionOptions{6, 2, 0.0, norm_first}, gen, nullptr);
      },
      {{"x", {2, 3, 6}}, {"memory", {2, 5, 6}}},
      [](const CrossAttentionLayer& layer, const std::vector<Tensor>& in) {
        return layer.forward(in[0], in[1], mask({0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 5}));
      },
      719);
}

const bool registered = register_gradchecks({
    cross_case("nn/cross_attention/post-ln", false),
    cross_case("nn/cross_attention/pre-ln", true),
});

}  // namespace

}  // namespace tapegrad::nn
