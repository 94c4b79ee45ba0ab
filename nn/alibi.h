#pragma once
// Attention with linear biases (ALiBi; Press et al. 2022, seed 003 §4.5): the positional component
// "alibi". Nothing is added to the token embeddings; every attention layer adds to the scores of head h
//   bias_h(i, j) = -m_h · |i - j|
// the paper's causal -m_h · (i - j), j <= i, made symmetric for the bidirectional encoder (under a causal
// mask the two agree on every visible key). The slopes m_h are fixed, no parameters.
// Letters: H heads, T_q queries, T_k keys.
#include <cstdint>
#include <utility>
#include <vector>

#include "autograd/tensor.h"
#include "nn/components.h"

namespace tapegrad::nn {

/// The paper's head slopes. For H a power of two, the geometric sequence m_h = 2^(-8h/H), h = 1..H (H = 8:
/// 1/2, 1/4, ..., 1/256). Otherwise, with P the largest power of two below H, the P slopes of P followed
/// by every other slope of 2P (its 1st, 3rd, ...) up to H in all. H < 1 is a ValueError.
std::vector<double> alibi_slopes(int64_t n_heads);

/// The "alibi" component: forward adds nothing; attention_bias is -m_h · |i - j|.
class AlibiPositionalEncoding : public PositionalEncoding {
 public:
  /// Positions 0..context_length-1 exist.
  explicit AlibiPositionalEncoding(int64_t context_length);

  /// Undefined: ALiBi adds nothing to the token embeddings. T > context_length is a ShapeError.
  Tensor forward(int64_t seq_len, DType dtype) const override;
  bool acts_in_attention() const override { return true; }
  /// bias[h, i, j] = -alibi_slopes(n_heads)[h] · |i - j|, no gradient.   -> (H, T_q, T_k)
  Tensor attention_bias(int64_t n_heads, int64_t T_q, int64_t T_k, DType dtype) const override;
  /// -m_h · |(q_start + i) - (k_start + j)|, every position within the context length.
  Tensor attention_bias_from(int64_t n_heads, int64_t T_q, int64_t T_k, int64_t q_start, int64_t k_start,
                             DType dtype) const override;
  /// q and k unchanged, from any position: ALiBi only biases the scores.
  std::pair<Tensor, Tensor> rotate_query_key_from(const Tensor& q, const Tensor& k, int64_t, int64_t) const override {
    return {q, k};
  }
  bool supports_positions_from() const override { return true; }
  /// alibi_slopes(n_heads), after the same check of T_q and T_k as attention_bias.
  std::optional<std::vector<double>> attention_bias_slopes(int64_t n_heads, int64_t T_q, int64_t T_k) const override;

  int64_t context_length() const { return context_length_; }

 private:
  /// A ShapeError unless both lengths are within the context length.
  void check_lengths(int64_t T_q, int64_t T_k, int64_t q_start = 0, int64_t k_start = 0) const;
  int64_t context_length_;
};

}  // namespace tapegrad::nn
