#include "nn/qkv_attention.h"

#include <memory>
#include <vector>

#include "autograd/ops/indexing.h"
#include "autograd/ops/matmul.h"
#include "autograd/ops/views.h"
#include "nn/init.h"

namespace tapegrad::nn {

QkvAttention::QkvAttention(const char* op, int64_t d_model, int64_t n_heads, bool bias, Generator& gen)
    : op_(op), d_model_(d_model), n_heads_(n_heads) {
  const int64_t C = d_model, H = n_heads;
  if (C <= 0 || H <= 0) throw ValueError(cat(op, ": d_model and n_heads must be positive, got ", C, " and ", H));
  if (C % H != 0)
    throw ValueError(cat(op, ": d_model ", C, " is not divisible by n_heads ", H,
                         " (each head takes d_model / n_heads dims)"));
  in_proj_weight = register_parameter("in_proj_weight", empty({3 * C, C}));
  xavier_uniform_(in_proj_weight, gen);
  if (bias) in_proj_bias = register_parameter("in_proj_bias", zeros({3 * C}));
  out_proj_ = &register_module("out_proj", std::make_unique<Linear>(C, C, bias, gen));
  if (bias) zeros_(out_proj_->bias);
}

Tensor QkvAttention::project_packed(const Tensor& x) const { return linear(x, in_proj_weight, in_proj_bias); }

Tensor QkvAttention::project_rows(const Tensor& x, int64_t from, int64_t to) const {
  return linear(x, slice(in_proj_weight, 0, from, to), in_proj_bias.defined() ? slice(in_proj_bias, 0, from, to) : Tensor{});
}

std::array<Tensor, 3> QkvAttention::split_packed(const Tensor& qkv) const {
  const int64_t C = d_model_;  // three slices, not split(): no vector of parts to allocate each step
  return {split_heads(slice(qkv, -1, 0, C)), split_heads(slice(qkv, -1, C, 2 * C)), split_heads(slice(qkv, -1, 2 * C, 3 * C))};
}

Tensor QkvAttention::split_heads(const Tensor& t) const {
  return transpose(reshape(t, {t.size(0), t.size(1), n_heads_, head_dim()}), 1, 2);
}

Tensor QkvAttention::merge_heads(const Tensor& heads) const {
  return out_proj_->forward(reshape(transpose(heads, 1, 2), {heads.size(0), heads.size(2), d_model_}));
}

void QkvAttention::check_key_padding(const Tensor& key_padding_mask, int64_t B, int64_t T_k) const {
  if (key_padding_mask.defined() &&
      (key_padding_mask.dim() != 2 || key_padding_mask.size(0) != B || key_padding_mask.size(1) != T_k))
    throw ShapeError(cat(op_, ": key_padding_mask ", key_padding_mask.shape(), " must be (B, T_k) = [", B, ",", T_k, "]"));
}

}  // namespace tapegrad::nn
