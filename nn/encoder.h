#pragma once
// The Transformer encoder: TransformerEncoderLayer and a stack of them, the same computation and the same
// parameter names as PyTorch's nn.TransformerEncoderLayer(batch_first=True) and nn.TransformerEncoder, so
// a state dictionary moves between the two unchanged. Composed from existing layers; no backward code.
// Letters: B batch, T positions, C = d_model, H heads, F = d_ff.
#include <cstdint>
#include <memory>
#include <vector>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/activation.h"
#include "nn/attention.h"
#include "nn/dropout.h"
#include "nn/layernorm.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace tapegrad::nn {

struct EncoderLayerOptions {
  int64_t d_model;       // C
  int64_t n_heads;       // H: must divide d_model
  int64_t d_ff = 2048;   // F: width of the feed-forward block (PyTorch's dim_feedforward)
  double dropout = 0.1;  // attention probabilities, feed-forward hidden, both residual branches
  Activation activation = Activation::relu;
  bool norm_first = false;  // false: post-LN (the original Transformer, PyTorch's default); true: pre-LN
  double layer_norm_eps = 1e-5;
};

/// One encoder layer: self-attention and a feed-forward block, each with a residual connection and a
/// LayerNorm.
///   post-LN: x = norm1(x + dropout1(sa(x)));  x = norm2(x + dropout2(ff(x)))
///   pre-LN : x = x + dropout1(sa(norm1(x)));  x = x + dropout2(ff(norm2(x)))
///   ff(x)  = linear2(dropout(act(linear1(x))))
/// Children, in PyTorch's order: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2.
class TransformerEncoderLayer : public Module {
 public:
  /// Parameters from gen (PyTorch's default initialisation for each submodule); dropout masks from
  /// dropout_rng, which may be null only when options.dropout == 0.
  TransformerEncoderLayer(const EncoderLayerOptions& options, Generator& gen, std::shared_ptr<Generator> dropout_rng);

  /// The layer applied to x. attn_mask: (T, T), bool true = hidden (or float, added); key_padding_mask:
  /// (B, T), bool true = pad. When attention_weights is given, this layer's per-head attention
  /// probabilities (B, H, T, T) are appended to it.   x: (B, T, C) -> (B, T, C)
  Tensor forward(const Tensor& x, const Tensor& attn_mask = {}, const Tensor& key_padding_mask = {},
                 std::vector<Tensor>* attention_weights = nullptr) const;

  const EncoderLayerOptions& options() const { return options_; }
  const MultiHeadAttention& self_attn() const { return *self_attn_; }
  const Linear& linear1() const { return *linear1_; }
  const Dropout& dropout() const { return *dropout_; }
  const Linear& linear2() const { return *linear2_; }
  const LayerNorm& norm1() const { return *norm1_; }
  const LayerNorm& norm2() const { return *norm2_; }
  const Dropout& dropout1() const { return *dropout1_; }
  const Dropout& dropout2() const { return *dropout2_; }

 private:
  /// dropout1(self_attn(x, x, x)), recording the weights when asked.   x: (B, T, C) -> (B, T, C)
  Tensor attention_block(const Tensor& x, const Tensor& attn_mask, const Tensor& key_padding_mask,
                         std::vector<Tensor>* attention_weights) const;
  /// dropout2(linear2(dropout(act(linear1(x))))).   x: (B, T, C) -> (B, T, C)
  Tensor feed_forward_block(const Tensor& x) const;

  EncoderLayerOptions options_;
  // Owned by the children list (on the heap, so the pointers survive moving the layer).
  MultiHeadAttention* self_attn_;
  Linear* linear1_;
  Dropout* dropout_;
  Linear* linear2_;
  LayerNorm* norm1_;
  LayerNorm* norm2_;
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
/// LayerNorm, as PyTorch's nn.TransformerEncoder(layer, n_layers, norm). Children: "layers", then "norm"
/// when final_norm (its eps is options.layer_norm_eps).
class TransformerEncoder : public Module {
 public:
  /// n_layers >= 0; dropout_rng may be null only when options.dropout == 0.
  TransformerEncoder(int64_t n_layers, const EncoderLayerOptions& options, bool final_norm, Generator& gen,
                     std::shared_ptr<Generator> dropout_rng);

  /// Every layer in order with the same masks, then the final norm if any. When attention_weights is given,
  /// each layer appends its (B, H, T, T) weights.   x: (B, T, C) -> (B, T, C)
  Tensor forward(const Tensor& x, const Tensor& attn_mask = {}, const Tensor& key_padding_mask = {},
                 std::vector<Tensor>* attention_weights = nullptr) const;

  size_t n_layers() const { return layers_->size(); }
  const TransformerEncoderLayer& layer(size_t i) const { return (*layers_)[i]; }
  /// The final LayerNorm, or null without one.
  const LayerNorm* norm() const { return norm_; }

 private:
  TransformerEncoderLayers* layers_;
  LayerNorm* norm_ = nullptr;
};

}  // namespace tapegrad::nn
