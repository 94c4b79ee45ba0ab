#pragma once
// Attention: scaled dot-product attention and multi-head attention, composed from existing ops (matmul,
// masked_fill, softmax, dropout, views); no backward code here. MultiHeadAttention has exactly the
// parameters of PyTorch's nn.MultiheadAttention (in_proj_weight, in_proj_bias, out_proj.weight,
// out_proj.bias), so its state moves to and from PyTorch unchanged. Tensors are batch first.
// Letters: B batch, H heads, T_q queries, T_k keys, C = d_model, D = C / H per head.
//
// Masks follow nn.MultiheadAttention: a bool mask is TRUE where attention is NOT allowed (hidden keys);
// a float mask is added to the scores (-inf hides). A query row whose keys are all hidden attends to
// nothing: its weights and its output are zeros (the softmax op returns zeros for an all -inf row), where
// PyTorch gives NaN.
#include <cstdint>
#include <memory>
#include <optional>

#include "autograd/ops/flash_attention.h"
#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/components.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/qkv_attention.h"

namespace tapegrad::nn {

/// softmax(q kᵀ / √D + masks) v, with dropout on the probabilities when training and dropout_p > 0.
/// attn_mask: bool (true = hidden) or float (added), broadcastable to the scores (B, ..., T_q, T_k),
/// usually (T_q, T_k); key_padding_mask: bool (true = pad) or float, (B, T_k), broadcast over the heads and
/// the queries. The returned weights are the probabilities after dropout (AttentionResult). rng is needed only when
/// training with dropout_p > 0.
///   q: (B, ..., T_q, D), k: (B, ..., T_k, D), v: (B, ..., T_k, D_v) -> output (B, ..., T_q, D_v),
///   weights (B, ..., T_q, T_k)
AttentionResult scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const Tensor& attn_mask = {}, const Tensor& key_padding_mask = {},
                                             double dropout_p = 0, bool training = false, Generator* rng = nullptr);

/// The checks every attention over (q, k, v) makes, naming `op` and the shapes: float dtypes, one dtype,
/// one rank >= 2 with the same leading dims, q and k of one head dim D, k and v of one number of keys.
///   q: (..., T_q, D), k: (..., T_k, D), v: (..., T_k, D_v)
void check_query_key_value(const char* op, const Tensor& q, const Tensor& k, const Tensor& v);

/// key_padding_mask must be (B, T_k) for q (B, ..., T_q, D) and k (B, ..., T_k, D): a ShapeError naming
/// `op` and the three shapes otherwise.
void check_key_padding_mask(const char* op, const Tensor& key_padding_mask, const Tensor& q, const Tensor& k);

/// The causal mask: true above the diagonal, so position i attends to positions j <= i only.   -> bool (T, T)
Tensor causal_mask(int64_t T);

/// The "causal" setting every attention that can hide later keys declares (softmax, linear): one --causal
/// flag, whichever is chosen.
SettingSpec causal_setting();

/// attn_mask with every key after its query hidden as well: the causal mask alone when attn_mask is
/// undefined, the union of the two for a bool mask, -inf over a float one.   -> (T, T) (or attn_mask's shape)
Tensor with_causal_mask(const Tensor& attn_mask, int64_t T);

/// Attention over at least this many keys runs as flash attention wherever it can (flash_options). Forward
/// and backward of one layer's attention on this project's Zen 5 machine, flash against the fused op
/// (docs/performance.md, "Flash attention"): 0.48x at T = 32, 0.84x at 64, 1.17x at 128, 1.3x at 256,
/// 1.4x at 2048 (2.7x causal, whose blocks above the diagonal flash skips). Shorter sequences keep the
/// fused op or the composed path, whose numbers (and dropout draws) it leaves unchanged.
inline constexpr int64_t kFlashAttentionMinKeys = 128;

struct MultiHeadAttentionOptions {
  int64_t d_model;       // C: embedding dim of queries, keys and values
  int64_t n_heads;       // H: must divide d_model
  bool bias = true;      // in_proj_bias and out_proj.bias
  double dropout = 0.0;  // on the attention probabilities, in training mode
  // τ > 0: softmax(q kᵀ / (√D · τ)). Above 1 flattens the weights towards uniform, below 1 sharpens them;
  // 1 is the standard attention, computed exactly as without the option. A positional bias
  // (PositionalEncoding::attention_bias) is added as it is, not divided by τ.
  double temperature = 1.0;
  // attend() (self-attention) hides every key after its query: GPT-style, position i sees j <= i only.
  bool causal = false;
};

/// Multi-head attention as PyTorch's nn.MultiheadAttention(d_model, n_heads, dropout, bias,
/// batch_first=True). Heads are split by weight splitting (seed 002 §3.6.2, seed 004): one projection per
/// q/k/v of width C, viewed as H heads of width D, attended in one batched product, merged back and
/// projected by out_proj.
class MultiHeadAttention : public QkvAttention {
 public:
  /// in_proj_weight [3C, C] (rows q, k, v) ~ xavier_uniform, in_proj_bias [3C] = 0, out_proj = Linear(C, C)
  /// (default init) with its bias then zeroed, as PyTorch (QkvAttention). d_model % n_heads != 0 is a
  /// ValueError naming both. dropout_rng may be null only when options.dropout == 0.
  MultiHeadAttention(const MultiHeadAttentionOptions& options, Generator& gen, std::shared_ptr<Generator> dropout_rng);

  /// Attention of each query over the keys, per head, merged and projected. Self-attention passes the same
  /// tensor three times (projected in one product); cross-attention has T_q != T_k. attn_mask: (T_q, T_k)
  /// or (B·H, T_q, T_k), bool (true = hidden) or float (added); key_padding_mask: (B, T_k), bool
  /// (true = pad) or float. With need_weights, weights are the per-head probabilities after dropout
  /// (PyTorch's average_attn_weights=False); otherwise weights is undefined. positions, when given, rotates
  /// q and k after the head split (rotate_query_key) and adds its attention_bias to the scores.
  ///   query: (B, T_q, C), key, value: (B, T_k, C) -> output (B, T_q, C), weights (B, H, T_q, T_k)
  AttentionResult forward(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask = {},
                          const Tensor& key_padding_mask = {}, bool need_weights = false,
                          const PositionalEncoding* positions = nullptr) const;
  /// forward(x, x, x, ...) with attn_mask combined with the causal mask when options.causal: the "softmax"
  /// attention component.   x: (B, T, C) -> (B, T, C)
  AttentionResult attend(const Tensor& x, const Tensor& attn_mask, const Tensor& key_padding_mask, bool need_weights,
                         const PositionalEncoding* positions = nullptr) const override;

  bool supports_kv_cache() const override { return true; }
  /// SelfAttention::attend_cached: the new positions' q, k and v from one product, k and v (after the
  /// positional hooks at their positions) appended to the cache, and each new query attending to every kept
  /// key up to its own position, at attend's temperature, without the tape.   x: (B, T, C) -> (B, T, C)
  Tensor attend_cached(const Tensor& x, KeyValueCache& cache, const PositionalEncoding* positions) const override;

  const MultiHeadAttentionOptions& options() const { return options_; }

 private:
  /// forward with the causal mask as a flag (attend's), so that flash attention can skip blocks.
  AttentionResult run(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask, bool causal,
                      const Tensor& key_padding_mask, bool need_weights, const PositionalEncoding* positions) const;
  /// How flash attention serves this call, or std::nullopt when it does not: weights asked for, an
  /// attn_mask besides the causal one, a float key padding mask, a bias that only a (T_q, T_k) tensor
  /// gives, or fewer than kFlashAttentionMinKeys keys.
  std::optional<FlashAttentionOptions> flash_options(int64_t T_q, int64_t T_k, const Tensor& attn_mask,
                                                     const Tensor& key_padding_mask, bool causal, bool need_weights,
                                                     const PositionalEncoding* positions) const;
  /// The query, key and value shapes checked: a ShapeError naming all three otherwise.
  void check_inputs(const Tensor& query, const Tensor& key, const Tensor& value) const;
  /// attn_mask checked against (T_q, T_k) or (B·H, T_q, T_k); the 3-D form as (B, H, T_q, T_k).
  Tensor checked_attn_mask(const Tensor& attn_mask, int64_t B, int64_t T_q, int64_t T_k) const;
  /// q, k, v split into heads, from one product when self-attention.   -> (B, H, T, D) each
  std::array<Tensor, 3> project(const Tensor& query, const Tensor& key, const Tensor& value) const;
  /// The composed path: the positional hooks, the temperature, scaled_dot_product_attention, the merge.
  AttentionResult attend_heads(Tensor q, Tensor k, const Tensor& v, Tensor mask, const Tensor& key_padding_mask,
                               bool need_weights, const PositionalEncoding* positions) const;

  MultiHeadAttentionOptions options_;
  std::shared_ptr<Generator> dropout_rng_;
};

}  // namespace tapegrad::nn
