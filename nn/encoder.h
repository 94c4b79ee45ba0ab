#pragma once
// The Transformer encoder: TransformerEncoderLayer and a stack of them, the same computation and the same
// parameter names as PyTorch's nn.TransformerEncoderLayer(batch_first=True) and nn.TransformerEncoder, so
// a state dictionary moves between the two unchanged. Composed from existing layers; no backward code.
// Letters: B batch, T positions, C = d_model, H heads, F = d_ff.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/components.h"
#include "nn/dropout.h"
#include "nn/kv_cache.h"
#include "nn/module.h"

namespace tapegrad::nn {

struct EncoderLayerOptions {
  int64_t d_model;                  // C
  int64_t n_heads;                  // H: must divide d_model
  int64_t d_ff = 2048;              // F: width of the feed-forward block (PyTorch's dim_feedforward)
  double dropout = 0.1;             // attention probabilities, feed-forward hidden, both residual branches
  std::string activation = "relu";  // of the feed-forward block
  bool norm_first = false;          // false: post-LN (the original Transformer, PyTorch's default); true: pre-LN
  // Registered components (nn/components.h) by name.
  std::string attention = "softmax";
  std::string norm = "layernorm";
  std::string ffn = "dense";
  // The components' own settings (causal, temperature, a norm's eps, moe's experts...): each variant reads
  // its own (settings_of), the declared default where none is given.
  ComponentSettings settings = {};
};

/// One encoder layer: self-attention and a feed-forward block, each with a residual connection and a
/// normalisation; the three are the registered components options.attention, .ffn and .norm.
///   post-LN: x = norm1(x + dropout1(sa(x)));  x = norm2(x + dropout2(ff(x)))
///   pre-LN : x = x + dropout1(sa(norm1(x)));  x = x + dropout2(ff(norm2(x)))
///   ff(x)  = linear2(dropout(act(linear1(x))))   (the "dense" block, registered inline)
/// Children, in PyTorch's order: self_attn, (the block's own: linear1, dropout, linear2), norm1, norm2,
/// dropout1, dropout2.
class TransformerEncoderLayer : public Module {
 public:
  /// Parameters from gen (PyTorch's default initialisation for each submodule); dropout masks from
  /// dropout_rng, which may be null only when options.dropout == 0.
  TransformerEncoderLayer(const EncoderLayerOptions& options, Generator& gen, std::shared_ptr<Generator> dropout_rng);

  /// The layer applied to x. attn_mask: (T, T), bool true = hidden (or float, added), combined with the
  /// causal mask by an attention whose causal setting is on; key_padding_mask: (B, T), bool true = pad. When attention_weights is
  /// given, this layer's per-head attention probabilities (B, H, T, T) are appended to it. positions: the
  /// model's positional encoding, handed to the attention for its hooks (may be null).
  ///   x: (B, T, C) -> (B, T, C)
  Tensor forward(const Tensor& x, const Tensor& attn_mask = {}, const Tensor& key_padding_mask = {},
                 std::vector<Tensor>* attention_weights = nullptr,
                 const PositionalEncoding* positions = nullptr) const;

  /// forward for positions after the cached ones (SelfAttention::attend_cached), without the tape: the
  /// layer's output at the new positions equals forward's with the causal mask over the whole sequence.
  ///   x: (B, T, C) -> (B, T, C)
  Tensor forward_cached(const Tensor& x, KeyValueCache& cache, const PositionalEncoding* positions = nullptr) const;

  const EncoderLayerOptions& options() const { return options_; }
  const SelfAttention& self_attn() const { return *self_attn_; }
  const FeedForwardBlock& feed_forward() const { return *feed_forward_; }
  const Norm& norm1() const { return *norm1_; }
  const Norm& norm2() const { return *norm2_; }
  const Dropout& dropout1() const { return *dropout1_; }
  const Dropout& dropout2() const { return *dropout2_; }

 private:
  /// The residual blocks around attend (x -> the attention's output), pre- or post-LN.   x: (B, T, C) -> (B, T, C)
  template <class Attend>
  Tensor residual_blocks(const Tensor& x, const Tensor& key_padding_mask, const Attend& attend) const;

  EncoderLayerOptions options_;
  // Owned by the children list (on the heap, so the pointers survive moving the layer).
  SelfAttention* self_attn_;
  FeedForwardBlock* feed_forward_;
  Norm* norm1_;
  Norm* norm2_;
  Dropout* dropout1_;
  Dropout* dropout2_;
};

/// The encoder's list of layers, children named "0", "1", ... as in PyTorch's nn.ModuleList, so the
/// parameters read "layers.0.self_attn.in_proj_weight".
class TransformerEncoderLayers : public Module {
 public:
  /// Appends a layer under the next index and returns it.
  TransformerEncoderLayer& append(std::unique_ptr<TransformerEncoderLayer> layer);
  size_t size() const { return layers_.size(); }
  const TransformerEncoderLayer& operator[](size_t i) const { return *layers_.at(i); }

 private:
  std::vector<TransformerEncoderLayer*> layers_;  // owned by the children list
};

/// A stack of n_layers encoder layers (each initialised independently from gen) and an optional final
/// normalisation, as PyTorch's nn.TransformerEncoder(layer, n_layers, norm). Children: "layers", then
/// "norm" when final_norm (the norm component options.norm, with its settings).
class TransformerEncoder : public Module {
 public:
  /// n_layers >= 0; dropout_rng may be null only when options.dropout == 0.
  TransformerEncoder(int64_t n_layers, const EncoderLayerOptions& options, bool final_norm, Generator& gen,
                     std::shared_ptr<Generator> dropout_rng);

  /// forward for positions after the cached ones, one cache per layer (TransformerEncoderLayer::
  /// forward_cached), without the tape; a ValueError unless caches.size() == n_layers.
  ///   x: (B, T, C) -> (B, T, C)
  Tensor forward_cached(const Tensor& x, std::vector<KeyValueCache>& caches,
                        const PositionalEncoding* positions = nullptr) const;

  /// Every layer in order with the same masks, then the final norm if any. When attention_weights is given,
  /// each layer appends its (B, H, T, T) weights; every layer's attention gets positions (may be null).
  ///   x: (B, T, C) -> (B, T, C)
  Tensor forward(const Tensor& x, const Tensor& attn_mask = {}, const Tensor& key_padding_mask = {},
                 std::vector<Tensor>* attention_weights = nullptr,
                 const PositionalEncoding* positions = nullptr) const;

  /// Activation checkpointing (autograd/ops/checkpoint.h) while recording: every layer but the last keeps
  /// only its input for backward and runs its forward again there, dropout drawing the same masks. Peak
  /// memory falls by about one layer's activations per layer, the step costs one more forward of those
  /// layers. The last layer is exempt: its backward comes right after the forward, so recomputing it would
  /// free nothing. Off by default. Refused (ValueError) for a layer whose feed-forward block leaves an
  /// auxiliary loss (moe), which must be recorded as the forward makes it. The recomputation draws again
  /// from the layers' dropout generator, rewound: a user's component drawing from another would not see
  /// the same numbers twice.
  void set_activation_checkpointing(bool on);
  bool activation_checkpointing() const { return !checkpointed_parameters_.empty(); }

  /// The sum of the layers' auxiliary losses from the last forward (FeedForwardBlock::auxiliary_loss, already
  /// weighted: moe's load balancing); undefined when no layer has one.   -> () scalar
  Tensor auxiliary_loss() const;

  size_t n_layers() const { return layers_->size(); }
  const TransformerEncoderLayer& layer(size_t i) const { return (*layers_)[i]; }
  /// The final normalisation, or null without one.
  const Norm* norm() const { return norm_; }

 private:
  TransformerEncoderLayers* layers_;
  Norm* norm_ = nullptr;
  // While checkpointing: each checkpointed layer's parameters, listed once (no allocation per step).
  std::vector<std::vector<Tensor>> checkpointed_parameters_;
};

}  // namespace tapegrad::nn
