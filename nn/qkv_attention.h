#pragma once
// What multi-head softmax attention and linear attention share: the parameters of PyTorch's
// nn.MultiheadAttention (in_proj_weight [3C, C] with rows q, k, v, in_proj_bias [3C], out_proj = Linear(C, C)),
// initialised as PyTorch does, so that a checkpoint's state has one layout whichever attention made it; the
// head split and merge; and the checks of the options and of a key-padding mask.
// Letters: B batch, H heads, T positions, C = d_model, D = C / H.
#include <array>
#include <cstdint>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/components.h"
#include "nn/linear.h"

namespace tapegrad::nn {

class QkvAttention : public SelfAttention {
 public:
  /// D = C / H.
  int64_t head_dim() const { return d_model_ / n_heads_; }
  const Linear& out_proj() const { return *out_proj_; }

  /// The parameter count of the projections (4C² + 4C): 4C² + 4C with biases (in_proj 3C·C + 3C, out_proj C·C + C).
  static int64_t projection_parameters(int64_t d_model, bool bias = true) {
    return 4 * d_model * d_model + (bias ? 4 * d_model : 0);
  }

  Tensor in_proj_weight;  // [3C, C]: rows [0, C) project queries, [C, 2C) keys, [2C, 3C) values
  Tensor in_proj_bias;    // [3C]; undefined without bias

 protected:
  /// Refuses d_model or n_heads below 1 and d_model % n_heads != 0 (a ValueError naming `op` and both), then
  /// registers in PyTorch's state_dict order: in_proj_weight ~ xavier_uniform (fans of [3C, C]: bound
  /// √(6 / (C + 3C))), in_proj_bias = 0, out_proj = Linear(C, C) with its bias zeroed.
  QkvAttention(const char* op, int64_t d_model, int64_t n_heads, bool bias, Generator& gen);

  /// q, k and v of self-attention in one product with the whole [3C, C] weight.   x: (B, T, C) -> (B, T, 3C)
  Tensor project_packed(const Tensor& x) const;
  /// x projected by the rows [from, to) of the in-projection (cross-attention's q, or k and v).
  ///   x: (B, T, C) -> (B, T, to - from)
  Tensor project_rows(const Tensor& x, int64_t from, int64_t to) const;
  /// The packed projection as q, k, v split into heads.   qkv: (B, T, 3C) -> 3 x (B, H, T, D)
  std::array<Tensor, 3> split_packed(const Tensor& qkv) const;
  /// (B, T, C) -> view (B, T, H, D) -> transpose (B, H, T, D): weight splitting, no per-head layers.
  Tensor split_heads(const Tensor& t) const;
  /// (B, H, T, D) -> transpose (B, T, H, D) -> reshape (B, T, C) -> out_proj.
  Tensor merge_heads(const Tensor& heads) const;
  /// key_padding_mask (when defined) must be (B, T_k): a ShapeError naming op_ otherwise.
  void check_key_padding(const Tensor& key_padding_mask, int64_t B, int64_t T_k) const;

  const char* op_;
  int64_t d_model_, n_heads_;
  Linear* out_proj_;  // owned by the children list
};

}  // namespace tapegrad::nn
