#pragma once
// Rotary position embeddings (RoPE; Su et al. 2021, seed 003 §4.4): the positional component "rope". Nothing
// is added to the token embeddings; inside every attention layer, q and k are rotated after the head split,
// each pair of dims (2i, 2i+1) of the vector at position m by the angle m·θ_i, θ_i = 10000^(-2i/D):
//   (x'_2i, x'_2i+1) = (x_2i cos mθ_i - x_2i+1 sin mθ_i,  x_2i sin mθ_i + x_2i+1 cos mθ_i)
// Rotations compose and are orthogonal, so <R_m q, R_n k> = <q, R_(n-m) k>: the scores depend on the
// positions only through n - m. No parameters.
// Letters: B batch, H heads, T positions, D = C / H per head.
#include <cstdint>
#include <utility>

#include "autograd/tensor.h"
#include "nn/components.h"

namespace tapegrad::nn {

/// Every vector x[..., t, :] rotated pairwise by the angles m·θ_i at its position m = first_position + t,
/// θ_i = base^(-2i/D), i = 0..D/2-1; composed from slices, products and a concat (the tape differentiates
/// it). An odd D is a ValueError.   x: (..., T, D) -> (..., T, D)
Tensor rotary_embedding(const Tensor& x, double base = 10000.0, int64_t first_position = 0);

/// The "rope" component: forward adds nothing; rotate_query_key rotates q and k by their positions.
class RotaryPositionalEncoding : public PositionalEncoding {
 public:
  /// Positions 0..context_length-1 exist.
  explicit RotaryPositionalEncoding(int64_t context_length);

  /// Undefined: RoPE adds nothing to the token embeddings. T > context_length is a ShapeError.
  Tensor forward(int64_t seq_len, DType dtype) const override;
  bool acts_in_attention() const override { return true; }
  /// rotary_embedding of each, query i at position i and key j at position j.
  ///   q: (B, H, T_q, D), k: (B, H, T_k, D) -> the same shapes
  std::pair<Tensor, Tensor> rotate_query_key(const Tensor& q, const Tensor& k) const override;
  /// The same with query i at position q_start + i and key j at k_start + j (each below the context length).
  std::pair<Tensor, Tensor> rotate_query_key_from(const Tensor& q, const Tensor& k, int64_t q_start,
                                                  int64_t k_start) const override;
  /// No bias, from any position.
  Tensor attention_bias_from(int64_t, int64_t, int64_t, int64_t, int64_t, DType) const override { return {}; }
  bool supports_positions_from() const override { return true; }
  /// No bias: only q and k turn.
  std::optional<std::vector<double>> attention_bias_slopes(int64_t, int64_t, int64_t) const override {
    return std::vector<double>{};
  }

  int64_t context_length() const { return context_length_; }

 private:
  int64_t context_length_;
};

}  // namespace tapegrad::nn
