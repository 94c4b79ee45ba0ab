#pragma once
// Multi-head scaled dot-product self-attention as one op, on the packed q|k|v projection.
#include <cstdint>

#include "autograd/tensor.h"

namespace tapegrad {

/// The attention weights of a call are kept for backward when they take fewer bytes than this (B·H·T²
/// numbers), and recomputed there otherwise: small models save the recomputation, large ones the memory.
inline constexpr int64_t kKeptAttentionWeightsBytes = int64_t{4} << 20;

struct FusedAttention {
  Tensor output;   // (B, T, C): the heads' outputs side by side, as the merge of the heads leaves them
  Tensor weights;  // (B, H, T, T): softmax(q kᵀ / √D) per head, as data (no gradient flows through it);
                   // only when asked for
};

/// softmax(q_h k_hᵀ / √D + masks) v_h for every batch and head h, read in place from the packed
/// projection qkv = [q | k | v] (head h of q is columns h·D .. h·D + D of the first C), written in place
/// into the merged (B, T, C) output. The same function as splitting the heads, scaled_dot_product_attention
/// (without dropout) and merging them back, without the copies, transposes and score tensors in between.
///   qkv: (B, T, 3C) contiguous, C = n_heads · D
///   attn_mask: undefined, or (T, T) bool (true hides the key) or float (added to the scores; no gradient)
///   key_padding_mask: undefined, or (B, T) bool (true hides the key) or float (added)
FusedAttention fused_self_attention(const Tensor& qkv, int64_t n_heads, const Tensor& attn_mask = {},
                                    const Tensor& key_padding_mask = {}, bool return_weights = false);

}  // namespace tapegrad
