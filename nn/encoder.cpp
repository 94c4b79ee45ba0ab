#include "nn/encoder.h"

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops/checkpoint.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/indexing.h"
#include "nn/attention.h"
#include "nn/module_gradcheck.h"

namespace tapegrad::nn {

TransformerEncoderLayer::TransformerEncoderLayer(const EncoderLayerOptions& options, Generator& gen,
                                                 std::shared_ptr<Generator> dropout_rng)
    : options_(options) {
  if (options.d_ff <= 0) throw ValueError(cat("TransformerEncoderLayer: d_ff must be positive, got ", options.d_ff));
  // Registered in PyTorch's order, so named_parameters() and the state dictionary list the same names in
  // the same order. The attention dropout is the layer's dropout, as in PyTorch.
  const NormKind::Entry& norm = component<NormKind>(options.norm);
  const VariantSettings norm_settings = chosen_settings<NormKind>(options);
  self_attn_ =
      &register_module("self_attn", component<AttentionKind>(options.attention).make(options, gen, dropout_rng));
  feed_forward_ = &register_inline(component<FeedForwardKind>(options.ffn).make(options, gen, dropout_rng));
  norm1_ = &register_module("norm1", norm.make(options.d_model, norm_settings, gen));
  norm2_ = &register_module("norm2", norm.make(options.d_model, norm_settings, gen));
  dropout1_ = &register_module("dropout1", std::make_unique<Dropout>(options.dropout, dropout_rng));
  dropout2_ = &register_module("dropout2", std::make_unique<Dropout>(options.dropout, dropout_rng));
}

template <class Attend>
Tensor TransformerEncoderLayer::residual_blocks(const Tensor& x, const Tensor& key_padding_mask,
                                                const Attend& attend) const {
  if (x.dim() != 3 || x.size(-1) != options_.d_model)
    throw ShapeError(
        cat("TransformerEncoderLayer: x ", x.shape(), " must be (B, T, C) with C = d_model = ", options_.d_model));
  if (options_.norm_first) {
    const Tensor h = x + dropout1_->forward(attend(norm1_->forward(x)));
    return h + dropout2_->forward(feed_forward_->forward_masked(norm2_->forward(h), key_padding_mask));
  }
  const Tensor h = norm1_->forward(x + dropout1_->forward(attend(x)));
  return norm2_->forward(h + dropout2_->forward(feed_forward_->forward_masked(h, key_padding_mask)));
}

Tensor TransformerEncoderLayer::forward(const Tensor& x, const Tensor& attn_mask, const Tensor& key_padding_mask,
                                        std::vector<Tensor>* attention_weights,
                                        const PositionalEncoding* positions) const {
  const ScopeName scope = enter_scope();
  return residual_blocks(x, key_padding_mask, [&](const Tensor& input) {
    AttentionResult result = self_attn_->attend(input, attn_mask, key_padding_mask, attention_weights != nullptr, positions);
    if (attention_weights != nullptr) attention_weights->push_back(result.weights);
    return result.output;
  });
}

Tensor TransformerEncoderLayer::forward_cached(const Tensor& x, KeyValueCache& cache,
                                               const PositionalEncoding* positions) const {
  const ScopeName scope = enter_scope();
  NoGradGuard inference;
  return residual_blocks(x, {}, [&](const Tensor& input) { return self_attn_->attend_cached(input, cache, positions); });
}

TransformerEncoderLayer& TransformerEncoderLayers::append(std::unique_ptr<TransformerEncoderLayer> layer) {
  TransformerEncoderLayer& added = register_module(std::to_string(layers_.size()), std::move(layer));
  layers_.push_back(&added);
  return added;
}

TransformerEncoder::TransformerEncoder(int64_t n_layers, const EncoderLayerOptions& options, bool final_norm,
                                       Generator& gen, std::shared_ptr<Generator> dropout_rng) {
  if (n_layers < 0) throw ValueError(cat("TransformerEncoder: n_layers must be >= 0, got ", n_layers));
  layers_ = &register_module("layers", std::make_unique<TransformerEncoderLayers>());
  // Each layer draws its own initial weights; PyTorch deep-copies one layer, so its layers start equal.
  for (int64_t i = 0; i < n_layers; ++i)
    layers_->append(std::make_unique<TransformerEncoderLayer>(options, gen, dropout_rng));
  if (final_norm)
    norm_ = &register_module(
        "norm", component<NormKind>(options.norm).make(options.d_model, chosen_settings<NormKind>(options), gen));
}

void TransformerEncoder::set_activation_checkpointing(bool on) {
  checkpointed_parameters_.clear();
  if (!on || layers_->size() < 2) return;
  for (size_t i = 0; i < layers_->size(); ++i)
    if (layer(i).feed_forward().has_auxiliary_loss())
      throw ValueError(cat("TransformerEncoder: activation checkpointing cannot recompute layer ", i, ": its ffn '",
                           layer(i).options().ffn, "' leaves an auxiliary loss, which must be recorded as the "
                           "forward makes it"));
  for (size_t i = 0; i + 1 < layers_->size(); ++i) checkpointed_parameters_.push_back(layer(i).parameters());
}

Tensor TransformerEncoder::auxiliary_loss() const {
  Tensor total;
  for (size_t i = 0; i < layers_->size(); ++i) {
    const Tensor layer_loss = layer(i).feed_forward().auxiliary_loss();
    if (layer_loss.defined()) total = total.defined() ? total + layer_loss : layer_loss;
  }
  return total;
}

Tensor TransformerEncoder::forward_cached(const Tensor& x, std::vector<KeyValueCache>& caches,
                                          const PositionalEncoding* positions) const {
  const ScopeName scope = enter_scope();
  if (caches.size() != layers_->size())
    throw ValueError(cat("TransformerEncoder: ", caches.size(), " KV caches for ", layers_->size(), " layers"));
  NoGradGuard inference;
  Tensor h = x;
  for (size_t i = 0; i < layers_->size(); ++i) h = (*layers_)[i].forward_cached(h, caches[i], positions);
  return norm_ ? norm_->forward(h) : h;
}

Tensor TransformerEncoder::forward(const Tensor& x, const Tensor& attn_mask, const Tensor& key_padding_mask,
                                   std::vector<Tensor>* attention_weights, const PositionalEncoding* positions) const {
  const ScopeName scope = enter_scope();
  // Weights asked for are returned as recorded tensors, which a checkpointed layer's forward does not make;
  // an encoding that acts inside attention with parameters of its own would need them listed beside the
  // layer's (learned positions act before the layers, not in them).
  const bool checkpointing =
      activation_checkpointing() && !attention_weights && grad_enabled() &&
      !(positions && positions->acts_in_attention() && positions->parameter_count() > 0);
  Tensor h = x;
  {
    const ScopeName in_layers = layers_->enter_scope();  // the list has no forward of its own: "layers.1"
    for (size_t i = 0; i < layers_->size(); ++i) {
      const TransformerEncoderLayer& layer = (*layers_)[i];
      if (checkpointing && i < checkpointed_parameters_.size()) {
        const auto forward = [&layer, attn_mask, key_padding_mask, positions](const Tensor& input) {
          return layer.forward(input, attn_mask, key_padding_mask, nullptr, positions);
        };
        h = checkpoint(forward, h, checkpointed_parameters_[i], layer.dropout1().rng().get());
      } else {
        h = layer.forward(h, attn_mask, key_padding_mask, attention_weights, positions);
      }
    }
  }
  return norm_ ? norm_->forward(h) : h;
}

namespace {

// Gradient checks over x and every named parameter, built from a fixed seed, converted to the check's dtype
// (float64 by default), dropout 0. The single layers see leading pads (batch 1, positions 0 and 1) and a
// trailing one (batch 0, position 3). The causal stack sees trailing pads only, so that key 0 is always
// visible: with leading pads too, most causal rows would be empty or one-hot and the W_q, W_k gradients
// would rest on very few rows.
Tensor leading_padding() { return mask({0, 0, 0, 1, 1, 1, 0, 0}, {2, 4}); }
Tensor trailing_padding() { return mask({0, 0, 0, 1, 0, 0, 1, 1}, {2, 4}); }

GradcheckCase layer_case(std::string name, EncoderLayerOptions options) {
  return module_case<TransformerEncoderLayer>(
      std::move(name),
      [options](Generator& gen) { return std::make_unique<TransformerEncoderLayer>(options, gen, nullptr); },
      {{"x", {2, 4, options.d_model}}},
      [](const TransformerEncoderLayer& layer, const std::vector<Tensor>& x) {
        return layer.forward(x[0], {}, leading_padding());
      });
}

const bool registered = register_gradchecks({
    layer_case("nn/encoder_layer/post-ln-relu", {6, 2, 8, 0.0, "relu", false}),
    layer_case("nn/encoder_layer/pre-ln-gelu", {6, 3, 8, 0.0, "gelu", true}),
    module_case<TransformerEncoder>(
        "nn/encoder/two-layers-final-norm-causal",
        [](Generator& gen) {
          return std::make_unique<TransformerEncoder>(2, EncoderLayerOptions{4, 2, 6, 0.0}, true, gen, nullptr);
        },
        {{"x", {2, 4, 4}}},
        [](const TransformerEncoder& encoder, const std::vector<Tensor>& x) {
          return encoder.forward(x[0], causal_mask(4), trailing_padding());
        }),
    // Layers 0 and 1 recomputed in backward, layer 2 not (the last never is).
    module_case<TransformerEncoder>(
        "nn/encoder/three-layers-checkpointed-pre-ln",
        [](Generator& gen) {
          auto encoder = std::make_unique<TransformerEncoder>(3, EncoderLayerOptions{4, 2, 6, 0.0, "gelu", true},
                                                              true, gen, nullptr);
          encoder->set_activation_checkpointing(true);
          return encoder;
        },
        {{"x", {2, 4, 4}}},
        [](const TransformerEncoder& encoder, const std::vector<Tensor>& x) {
          return encoder.forward(x[0], {}, leading_padding());
        }),
});

}  // namespace

}  // namespace tapegrad::nn
