#pragma once
// Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"; seed 003, linear attention): the
// softmax similarity exp(q·k) replaced by a kernel φ(q)ᵀφ(k) with φ(x) = elu(x) + 1 > 0, so that the
// products regroup and no (T, T) matrix is ever built:
//   out_i = φ(q_i)ᵀ (Σ_j φ(k_j) v_jᵀ) / (φ(q_i)ᵀ Σ_j φ(k_j) + eps)
// Time O(T·D²) and memory O(T·D + D²) per head, against softmax's O(T²·D) and O(T²).
// The component "linear" has the parameters of the "softmax" one, under the same names (in_proj_weight
// [3C, C], in_proj_bias [3C], out_proj.weight, out_proj.bias), so a checkpoint's state has one layout.
// Letters: B batch, H heads, T positions, C = d_model, D = C / H.
#include <cstdint>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/components.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/qkv_attention.h"

namespace tapegrad::nn {

/// The feature map φ(x) = elu(x) + 1, positive everywhere, slope 1 for x > 0 and e^x below.   x: any -> same
Tensor elu_feature_map(const Tensor& x);

/// φ(q) (φ(k)ᵀ v) / (φ(q) Σ_j φ(k_j) + eps) per leading index, never forming φ(q) φ(k)ᵀ. key_padding_mask:
/// bool (B, T_k), true = pad, or undefined: a pad key adds nothing to either sum. eps keeps a query whose
/// keys are all padded at a zero output (0 / eps) instead of 0 / 0. causal: query i sums over keys j <= i
/// only (T_q == T_k), through running sums: the prefix states Σ_{j≤i} φ(k_j) v_jᵀ are kept for every i,
/// (.., T, D, D_v), which is linear in T but D times the non-causal state.
///   q: (B, ..., T_q, D), k: (B, ..., T_k, D), v: (B, ..., T_k, D_v) -> (B, ..., T_q, D_v)
Tensor linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding_mask = {},
                        double eps = 1e-6, bool causal = false);

struct LinearAttentionOptions {
  int64_t d_model;      // C
  int64_t n_heads;      // H: must divide d_model
  bool bias = true;     // in_proj_bias and out_proj.bias
  double eps = 1e-6;    // added to the normaliser (the reference implementation's value); >= 0
  bool causal = false;  // attend() sums over keys j <= i only, by running sums (GPT-style)
};

/// Multi-head self-attention with linear_attention in place of softmax attention. There are no attention
/// probabilities, hence no attention dropout and no weights to return.
class LinearAttention : public QkvAttention {
 public:
  /// Parameters and initialisation as MultiHeadAttention: in_proj_weight [3C, C] ~ xavier_uniform,
  /// in_proj_bias [3C] = 0, out_proj = Linear(C, C) with its bias zeroed. d_model % n_heads != 0 is a
  /// ValueError naming both.
  LinearAttention(const LinearAttentionOptions& options, Generator& gen);

  /// Self-attention of x. key_padding_mask: bool (B, T), true = pad, or undefined. attn_mask: undefined,
  /// or exactly the causal mask (bool (T, T), true above the diagonal), computed with running sums as with
  /// options.causal; any other mask is a ValueError (an arbitrary pattern has no O(T) form). With
  /// need_weights the weights are still undefined: there is no (T, T) matrix.
  ///   x: (B, T, C) -> output (B, T, C)
  /// positions that act inside attention (rope, alibi) are a ValueError: their hooks are defined on
  /// softmax scores, which linear attention never forms.
  AttentionResult attend(const Tensor& x, const Tensor& attn_mask, const Tensor& key_padding_mask, bool need_weights,
                         const PositionalEncoding* positions = nullptr) const override;

  const LinearAttentionOptions& options() const { return options_; }

 private:
  LinearAttentionOptions options_;
};

}  // namespace tapegrad::nn
