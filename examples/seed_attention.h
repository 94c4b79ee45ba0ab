#pragma once
// The attention modules of seed 002 (ch. 3 of "Build a Large Language Model From Scratch", §3.4–3.6) and
// its exercise solutions (seed 000), written as a user of tapegrad would write them: each is a
// tapegrad::nn::Module subclass in this header, built from existing ops (matmul, masked_fill, softmax,
// dropout, views) and existing layers (nn::Linear, nn::Dropout), with no backward code and no change to
// the library. Parameters and children are registered under the seed's names, so named_parameters()
// reads "W_query.weight", "heads.0.W_key.weight", "out_proj.bias", ... exactly as PyTorch's
// named_parameters() does for the seed's classes.
//
// One difference from PyTorch's state_dict(): the seed registers the causal mask as a buffer
// (register_buffer("mask", ...)), so PyTorch's state_dict() also holds "mask" (or "heads.0.mask") entries.
// Here the mask is a plain member rebuilt from context_length, not state; drop those entries before
// loading a PyTorch state dictionary.
//
// Letters: B batch, T tokens (num_tokens), H heads, D = d_out / H per head.
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autograd.h"
#include "nn/attention.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace seed {

using tapegrad::Generator;
using tapegrad::Tensor;

namespace detail {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

/// Throws a ShapeError naming the module unless x has rank in [min_rank, max_rank] and last dim d_in;
/// layout says what the module takes, e.g. "(B, T, d_in)".
inline void check_input(const char* module, const Tensor& x, int min_rank, int max_rank, const char* layout,
                        int64_t d_in) {
  if (x.dim() < min_rank || x.dim() > max_rank || x.size(-1) != d_in)
    throw tapegrad::ShapeError(
        tapegrad::cat(module, ": input ", x.shape(), " must be ", layout, " with d_in = ", d_in));
}

/// Throws a ValueError naming the module unless every size is positive.
inline void check_positive(const char* module, std::initializer_list<std::pair<const char*, int64_t>> sizes) {
  for (const auto& [name, value] : sizes)
    if (value <= 0) throw tapegrad::ValueError(tapegrad::cat(module, ": ", name, " must be positive, got ", value));
}

/// The causal mask for the first T of context_length positions: mask[:T, :T] (true = a future key).
///   mask: bool (L, L) -> bool (T, T)
inline Tensor first_tokens(const char* module, const Tensor& mask, int64_t T) {
  if (T > mask.size(0))
    throw tapegrad::ShapeError(tapegrad::cat(module, ": ", T, " tokens exceed context_length ", mask.size(0),
                                             " (the causal mask covers context_length positions)"));
  return tapegrad::slice(tapegrad::slice(mask, 0, 0, T), 1, 0, T);
}

/// softmax(scores / √d_k) along the last dim: the scaled attention weights.   scores: (..., T, T) -> same
inline Tensor scaled_softmax(const Tensor& scores, int64_t d_k) {
  return tapegrad::softmax(scores / std::sqrt(static_cast<double>(d_k)), -1);
}

}  // namespace detail

/// Seed 002 §3.4.2 SelfAttention_v1: three raw [d_in, d_out] matrices drawn like torch.rand (U[0, 1)),
/// applied as x @ W. Parameters: W_query, W_key, W_value, drawn from gen in that order.
class SelfAttentionV1 : public tapegrad::nn::Module {
 public:
  SelfAttentionV1(int64_t d_in, int64_t d_out, Generator& gen) : d_in_(d_in) {
    detail::check_positive("SelfAttentionV1", {{"d_in", d_in}, {"d_out", d_out}});
    W_query = register_parameter("W_query", tapegrad::rand({d_in, d_out}, gen));
    W_key = register_parameter("W_key", tapegrad::rand({d_in, d_out}, gen));
    W_value = register_parameter("W_value", tapegrad::rand({d_in, d_out}, gen));
  }

  /// softmax(q kᵀ / √d_out) v with q = x W_query, k = x W_key, v = x W_value.
  ///   x: (T, d_in) or (B, T, d_in) -> (T, d_out) or (B, T, d_out)
  Tensor forward(const Tensor& x) const {
    detail::check_input("SelfAttentionV1", x, 2, 3, "(T, d_in) or (B, T, d_in)", d_in_);
    const Tensor keys = tapegrad::matmul(x, W_key);
    const Tensor queries = tapegrad::matmul(x, W_query);
    const Tensor values = tapegrad::matmul(x, W_value);
    const Tensor scores = tapegrad::matmul(queries, tapegrad::transpose(keys, -2, -1));  // ω
    return tapegrad::matmul(detail::scaled_softmax(scores, keys.size(-1)), values);
  }

  Tensor W_query;  // [d_in, d_out]
  Tensor W_key;    // [d_in, d_out]
  Tensor W_value;  // [d_in, d_out]

 private:
  int64_t d_in_;
};

/// Seed 002 §3.4.2 SelfAttention_v2: the same computation with three nn::Linear layers (no bias by
/// default), so x @ W becomes x Wᵀ with W = weight [d_out, d_in]: v1 with W = v2's weightᵀ is v2
/// (exercise 3.1). Children: W_query, W_key, W_value, initialised from gen in that order.
class SelfAttentionV2 : public tapegrad::nn::Module {
 public:
  SelfAttentionV2(int64_t d_in, int64_t d_out, bool qkv_bias, Generator& gen) {
    detail::check_positive("SelfAttentionV2", {{"d_in", d_in}, {"d_out", d_out}});
    using tapegrad::nn::Linear;
    W_query_ = &register_module("W_query", std::make_unique<Linear>(d_in, d_out, qkv_bias, gen));
    W_key_ = &register_module("W_key", std::make_unique<Linear>(d_in, d_out, qkv_bias, gen));
    W_value_ = &register_module("W_value", std::make_unique<Linear>(d_in, d_out, qkv_bias, gen));
  }

  /// softmax(q kᵀ / √d_out) v with q = W_query(x), k = W_key(x), v = W_value(x).
  ///   x: (T, d_in) or (B, T, d_in) -> (T, d_out) or (B, T, d_out)
  Tensor forward(const Tensor& x) const {
    detail::check_input("SelfAttentionV2", x, 2, 3, "(T, d_in) or (B, T, d_in)", W_query_->in_features());
    const Tensor keys = W_key_->forward(x);
    const Tensor queries = W_query_->forward(x);
    const Tensor values = W_value_->forward(x);
    const Tensor scores = tapegrad::matmul(queries, tapegrad::transpose(keys, -2, -1));
    return tapegrad::matmul(detail::scaled_softmax(scores, keys.size(-1)), values);
  }

  const tapegrad::nn::Linear& W_query() const { return *W_query_; }
  const tapegrad::nn::Linear& W_key() const { return *W_key_; }
  const tapegrad::nn::Linear& W_value() const { return *W_value_; }

 private:
  tapegrad::nn::Linear* W_query_;  // owned by the children list, as every child pointer below
  tapegrad::nn::Linear* W_key_;
  tapegrad::nn::Linear* W_value_;
};

struct CausalAttentionOptions {
  int64_t d_in;
  int64_t d_out;
  int64_t context_length;  // the longest sequence the causal mask covers
  double dropout = 0.0;    // on the attention weights, in training mode
  bool qkv_bias = false;
};

/// Seed 002 §3.5.3 CausalAttention: SelfAttentionV2 on a batch, with the scores of future keys set to -inf
/// before the softmax and dropout on the weights. Children: W_query, W_key, W_value (from gen in that
/// order), dropout (draws from dropout_rng, which may be null only when options.dropout == 0).
class CausalAttention : public tapegrad::nn::Module {
 public:
  CausalAttention(const CausalAttentionOptions& options, Generator& gen, std::shared_ptr<Generator> dropout_rng)
      : options_(options) {
    detail::check_positive(
        "CausalAttention",
        {{"d_in", options.d_in}, {"d_out", options.d_out}, {"context_length", options.context_length}});
    using tapegrad::nn::Linear;
    W_query_ =
        &register_module("W_query", std::make_unique<Linear>(options.d_in, options.d_out, options.qkv_bias, gen));
    W_key_ = &register_module("W_key", std::make_unique<Linear>(options.d_in, options.d_out, options.qkv_bias, gen));
    W_value_ =
        &register_module("W_value", std::make_unique<Linear>(options.d_in, options.d_out, options.qkv_bias, gen));
    dropout_ =
        &register_module("dropout", std::make_unique<tapegrad::nn::Dropout>(options.dropout, std::move(dropout_rng)));
    mask_ = tapegrad::nn::causal_mask(options.context_length);
  }

  /// Causal scaled dot-product attention of every token over itself and the tokens before it:
  ///   S = q kᵀ (B, T, T);  S_ij = -inf for j > i;  P = dropout(softmax(S / √d_out));  out = P v
  ///   x: (B, T, d_in) with T <= context_length -> (B, T, d_out)
  Tensor forward(const Tensor& x) const {
    detail::check_input("CausalAttention", x, 3, 3, "(B, T, d_in)", options_.d_in);
    const int64_t num_tokens = x.size(1);
    const Tensor keys = W_key_->forward(x);
    const Tensor queries = W_query_->forward(x);
    const Tensor values = W_value_->forward(x);
    Tensor scores = tapegrad::matmul(queries, tapegrad::transpose(keys, 1, 2));  // (B, T, T)
    scores = tapegrad::masked_fill(scores, detail::first_tokens("CausalAttention", mask_, num_tokens), -detail::kInf);
    const Tensor weights = dropout_->forward(detail::scaled_softmax(scores, keys.size(-1)));
    return tapegrad::matmul(weights, values);
  }

  const CausalAttentionOptions& options() const { return options_; }
  const tapegrad::nn::Linear& W_query() const { return *W_query_; }
  const tapegrad::nn::Linear& W_key() const { return *W_key_; }
  const tapegrad::nn::Linear& W_value() const { return *W_value_; }
  /// bool (context_length, context_length), true above the diagonal: the seed's mask.bool().
  const Tensor& mask() const { return mask_; }

 private:
  CausalAttentionOptions options_;
  tapegrad::nn::Linear* W_query_;
  tapegrad::nn::Linear* W_key_;
  tapegrad::nn::Linear* W_value_;
  tapegrad::nn::Dropout* dropout_;
  Tensor mask_;
};

struct MultiHeadAttentionWrapperOptions {
  int64_t d_in;
  int64_t d_out;  // per head: the output has num_heads · d_out dims
  int64_t context_length;
  double dropout = 0.0;
  int64_t num_heads = 1;
  bool qkv_bias = false;
  bool out_proj = false;  // exercise 3.2: a Linear(num_heads · d_out, num_heads · d_out) after the concatenation
};

/// Seed 002 §3.6.1 MultiHeadAttentionWrapper: num_heads independent CausalAttention heads, children
/// "heads.0", "heads.1", ... (PyTorch's ModuleList names), their outputs concatenated on the last dim;
/// with options.out_proj (seed 000, exercise 3.2) a child "out_proj" projects the concatenation.
class MultiHeadAttentionWrapper : public tapegrad::nn::Module {
 public:
  MultiHeadAttentionWrapper(const MultiHeadAttentionWrapperOptions& options, Generator& gen,
                            std::shared_ptr<Generator> dropout_rng)
      : options_(options) {
    detail::check_positive("MultiHeadAttentionWrapper", {{"num_heads", options.num_heads}});
    const CausalAttentionOptions head{options.d_in, options.d_out, options.context_length, options.dropout,
                                      options.qkv_bias};
    for (int64_t h = 0; h < options.num_heads; ++h)
      heads_.push_back(
          &register_module("heads." + std::to_string(h), std::make_unique<CausalAttention>(head, gen, dropout_rng)));
    if (options.out_proj) {
      const int64_t width = options.num_heads * options.d_out;
      out_proj_ = &register_module("out_proj", std::make_unique<tapegrad::nn::Linear>(width, width, true, gen));
    }
  }

  /// concat(head_0(x), ..., head_{H-1}(x)) on the last dim, then out_proj when there is one.
  ///   x: (B, T, d_in) -> (B, T, H · d_out)
  Tensor forward(const Tensor& x) const {
    std::vector<Tensor> outputs;
    for (const CausalAttention* head : heads_) outputs.push_back(head->forward(x));
    const Tensor context = tapegrad::concat(outputs, -1);
    return out_proj_ ? out_proj_->forward(context) : context;
  }

  const MultiHeadAttentionWrapperOptions& options() const { return options_; }
  size_t num_heads() const { return heads_.size(); }
  const CausalAttention& head(size_t h) const { return *heads_.at(h); }
  /// The exercise-3.2 projection, or null without one.
  const tapegrad::nn::Linear* out_proj() const { return out_proj_; }

 private:
  MultiHeadAttentionWrapperOptions options_;
  std::vector<CausalAttention*> heads_;
  tapegrad::nn::Linear* out_proj_ = nullptr;
};

struct SeedMultiHeadAttentionOptions {
  int64_t d_in;
  int64_t d_out;  // total over the heads: each head has D = d_out / num_heads dims
  int64_t context_length;
  double dropout = 0.0;
  int64_t num_heads = 1;
  bool qkv_bias = false;
};

/// Seed 002 §3.6.2 MultiHeadAttention, with weight splitting: one projection per q/k/v of width d_out,
/// viewed as H heads of width D and attended in one batched product, then merged and projected by
/// out_proj. Children, in the seed's order: W_query, W_key, W_value (Linear(d_in, d_out, qkv_bias)),
/// out_proj (Linear(d_out, d_out) with bias), dropout. (tapegrad's own nn::MultiHeadAttention is this
/// computation with PyTorch's nn.MultiheadAttention parameter layout.)
class SeedMultiHeadAttention : public tapegrad::nn::Module {
 public:
  SeedMultiHeadAttention(const SeedMultiHeadAttentionOptions& options, Generator& gen,
                         std::shared_ptr<Generator> dropout_rng)
      : options_(options) {
    detail::check_positive("SeedMultiHeadAttention", {{"d_in", options.d_in},
                                                      {"d_out", options.d_out},
                                                      {"context_length", options.context_length},
                                                      {"num_heads", options.num_heads}});
    if (options.d_out % options.num_heads != 0)
      throw tapegrad::ValueError(tapegrad::cat("SeedMultiHeadAttention: d_out ", options.d_out,
                                               " must be divisible by num_heads ", options.num_heads));
    using tapegrad::nn::Linear;
    const int64_t d_in = options.d_in, d_out = options.d_out;
    W_query_ = &register_module("W_query", std::make_unique<Linear>(d_in, d_out, options.qkv_bias, gen));
    W_key_ = &register_module("W_key", std::make_unique<Linear>(d_in, d_out, options.qkv_bias, gen));
    W_value_ = &register_module("W_value", std::make_unique<Linear>(d_in, d_out, options.qkv_bias, gen));
    out_proj_ = &register_module("out_proj", std::make_unique<Linear>(d_out, d_out, true, gen));
    dropout_ =
        &register_module("dropout", std::make_unique<tapegrad::nn::Dropout>(options.dropout, std::move(dropout_rng)));
    mask_ = tapegrad::nn::causal_mask(options.context_length);
  }

  /// x: (B, T, d_in) with T <= context_length -> (B, T, d_out)
  ///   q, k, v = W_query(x), W_key(x), W_value(x)              (B, T, d_out)
  ///   view (B, T, H, D), transpose(1, 2)                      (B, H, T, D): the heads, no copy
  ///   S = q kᵀ, S_ij = -inf for j > i                         (B, H, T, T)
  ///   P = dropout(softmax(S / √D));  ctx = P v                (B, H, T, D)
  ///   transpose(1, 2), reshape (B, T, d_out), out_proj        (B, T, d_out)
  Tensor forward(const Tensor& x) const {
    detail::check_input("SeedMultiHeadAttention", x, 3, 3, "(B, T, d_in)", options_.d_in);
    const int64_t b = x.size(0), num_tokens = x.size(1), H = options_.num_heads, D = head_dim();
    auto split_heads = [&](const Tensor& t) {
      return tapegrad::transpose(tapegrad::reshape(t, {b, num_tokens, H, D}), 1, 2);
    };
    const Tensor keys = split_heads(W_key_->forward(x));
    const Tensor queries = split_heads(W_query_->forward(x));
    const Tensor values = split_heads(W_value_->forward(x));
    Tensor scores = tapegrad::matmul(queries, tapegrad::transpose(keys, 2, 3));  // a dot product per head
    scores = tapegrad::masked_fill(scores, detail::first_tokens("SeedMultiHeadAttention", mask_, num_tokens),
                                   -detail::kInf);  // (T, T) broadcast over B and H
    const Tensor weights = dropout_->forward(detail::scaled_softmax(scores, D));
    const Tensor context = tapegrad::transpose(tapegrad::matmul(weights, values), 1, 2);  // (B, T, H, D)
    return out_proj_->forward(tapegrad::reshape(context, {b, num_tokens, options_.d_out}));
  }

  const SeedMultiHeadAttentionOptions& options() const { return options_; }
  /// D = d_out / num_heads.
  int64_t head_dim() const { return options_.d_out / options_.num_heads; }
  const tapegrad::nn::Linear& W_query() const { return *W_query_; }
  const tapegrad::nn::Linear& W_key() const { return *W_key_; }
  const tapegrad::nn::Linear& W_value() const { return *W_value_; }
  const tapegrad::nn::Linear& out_proj() const { return *out_proj_; }

 private:
  SeedMultiHeadAttentionOptions options_;
  tapegrad::nn::Linear* W_query_;
  tapegrad::nn::Linear* W_key_;
  tapegrad::nn::Linear* W_value_;
  tapegrad::nn::Linear* out_proj_;
  tapegrad::nn::Dropout* dropout_;
  Tensor mask_;
};

}  // namespace seed
