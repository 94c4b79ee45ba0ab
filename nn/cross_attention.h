#pragma once
// Cross-attention as a decoder block: the queries come from x, the keys and values from a memory (an
// encoder's output), with a residual connection and a normalisation around it. The names are those of the
// cross-attention sub-block of PyTorch's nn.TransformerDecoderLayer(batch_first=True): the attention is
// "multihead_attn" (an nn.MultiheadAttention); here the block stands alone, so its norm and dropout are
// "norm" and "dropout" (the decoder layer's norm2 and dropout2). Composed from existing layers; no
// backward code.
// Letters: B batch, T_q positions of x, T_k positions of the memory, C = d_model, H heads.
#include <cstdint>
#include <memory>
#include <string>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/attention.h"
#include "nn/components.h"
#include "nn/dropout.h"
#include "nn/module.h"

namespace tapegrad::nn {

struct CrossAttentionOptions {
  int64_t d_model;               // C, of x and of the memory
  int64_t n_heads;               // H: must divide d_model
  double dropout = 0.1;          // attention probabilities and the residual branch
  bool norm_first = false;       // false: post-LN, PyTorch's default; true: pre-LN
  std::string norm = "layernorm";  // a registered norm component (nn/components.h)
  ComponentSettings settings = {};  // the norm's own ("norm": {"eps": ...}); absent: its defaults
};

/// x attending to a memory, with a residual and a norm, as PyTorch's decoder layer does in its
/// cross-attention sub-block (_mha_block):
///   post-LN: x = norm(x + dropout(multihead_attn(x, memory, memory)))
///   pre-LN : x = x + dropout(multihead_attn(norm(x), memory, memory))
/// Children, in order: multihead_attn, norm, dropout.
class CrossAttentionLayer : public Module {
 public:
  /// Parameters from gen (PyTorch's default initialisation); dropout masks from dropout_rng, which may be
  /// null only when options.dropout == 0.
  CrossAttentionLayer(const CrossAttentionOptions& options, Generator& gen, std::shared_ptr<Generator> dropout_rng);

  /// Each position of x attends over the memory. memory_key_padding_mask: (B, T_k), bool true = pad (may be
  /// undefined); attn_mask: (T_q, T_k), bool true = hidden or float, added (may be undefined).
  ///   x: (B, T_q, C), memory: (B, T_k, C) -> (B, T_q, C)
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& memory_key_padding_mask = {},
                 const Tensor& attn_mask = {}) const;

  const CrossAttentionOptions& options() const { return options_; }
  const MultiHeadAttention& multihead_attn() const { return *multihead_attn_; }
  const Norm& norm() const { return *norm_; }

 private:
  CrossAttentionOptions options_;
  // Owned by the children list.
  MultiHeadAttention* multihead_attn_;
  Norm* norm_;
  Dropout* dropout_;
};

}  // namespace tapegrad::nn
