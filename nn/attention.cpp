#include "nn/attention.h"

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "autograd/ops/attention.h"
#include "autograd/ops/dropout.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/indexing.h"
#include "autograd/ops/matmul.h"
#include "autograd/ops/softmax.h"
#include "autograd/ops/views.h"
#include "autograd/tape.h"
#include "nn/encoder.h"
#include "nn/init.h"
#include "nn/module_gradcheck.h"

namespace tapegrad::nn {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Applies one mask to the scores: a bool mask hides (-inf) where true, a float mask is added. The mask
/// must broadcast to the scores without enlarging them.
Tensor apply_mask(const Tensor& scores, const Tensor& mask, const char* what) {
  const char* op = "scaled_dot_product_attention";
  bool fits = mask.dim() <= scores.dim();
  for (int i = 1; fits && i <= mask.dim(); ++i) {
    const int64_t m = mask.shape()[mask.dim() - i], s = scores.shape()[scores.dim() - i];
    fits = m == s || m == 1;
  }
  if (!fits)
    throw ShapeError(cat(op, ": ", what, " ", mask.shape(), " does not broadcast to the scores ", scores.shape()));
  if (mask.dtype() == DType::boolean) return masked_fill(scores, mask, -kInf);
  if (mask.dtype() != scores.dtype())
    throw DTypeError(cat(op, ": ", what, " ", mask.shape(), " is ", dtype_name(mask.dtype()),
                         "; expected bool (true = hidden) or ", dtype_name(scores.dtype()), " (added to the scores)"));
  return scores + mask;
}

/// The attention mask with a positional bias added, as one float mask. mask: undefined, (T_q, T_k) or
/// (B, H, T_q, T_k), bool (true = hidden) or float; bias: undefined or float (H, T_q, T_k). A bool mask
/// becomes -inf where hidden and the bias elsewhere; a float mask is summed with the bias.
///   -> (H, T_q, T_k) or (B, H, T_q, T_k), or mask itself without a bias
Tensor with_bias(const Tensor& mask, const Tensor& bias) {
  if (!bias.defined()) return mask;
  if (!mask.defined()) return bias;
  if (mask.dtype() != DType::boolean) return mask + bias;
  // (T_q, T_k) broadcasts into the bias as it is; (B, H, T_q, T_k) needs the bias expanded to it first.
  return masked_fill(mask.dim() > bias.dim() ? expand(bias, mask.shape()) : bias, mask, -kInf);
}

/// x Wᵀ + b for a block of rows of the packed in-projection.   x: (B, T, C), W: (N, C), b: (N) -> (B, T, N)
Tensor project(const Tensor& x, const Tensor& W, const Tensor& b) { return linear(x, W, b); }

}  // namespace

void check_key_padding_mask(const char* op, const Tensor& key_padding_mask, const Tensor& q, const Tensor& k) {
  const int rank = q.dim();
  const int64_t T_k = k.size(-2);
  if (rank < 3 || key_padding_mask.dim() != 2 || key_padding_mask.size(0) != q.size(0) ||
      key_padding_mask.size(1) != T_k)
    throw ShapeError(cat(op, ": key_padding_mask ", key_padding_mask.shape(), " must be (B, T_k) = [",
                         rank < 3 ? 0 : q.size(0), ",", T_k, "] for q ", q.shape(), " and k ", k.shape()));
}

void check_query_key_value(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  for (const Tensor* t : {&q, &k, &v})
    if (!is_floating(t->dtype()))
      throw DTypeError(cat(op, ": q, k, v must be float32 or float64, got ", dtype_name(t->dtype()), " ", t->shape()));
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw DTypeError(cat(op, ": q, k, v have dtypes ", dtype_name(q.dtype()), ", ", dtype_name(k.dtype()), ", ",
                         dtype_name(v.dtype())));
  const int rank = q.dim();
  if (rank < 2 || k.dim() != rank || v.dim() != rank)
    throw ShapeError(cat(op, ": q ", q.shape(), ", k ", k.shape(), ", v ", v.shape(),
                         " must have the same rank, at least 2 (..., T, D)"));
  for (int i = 0; i < rank - 2; ++i)
    if (k.shape()[i] != q.shape()[i] || v.shape()[i] != q.shape()[i])
      throw ShapeError(cat(op, ": the leading dims of q ", q.shape(), ", k ", k.shape(), ", v ", v.shape(), " differ"));
  if (k.size(-1) != q.size(-1))
    throw ShapeError(cat(op, ": q ", q.shape(), " and k ", k.shape(), " have different head dims"));
  if (v.size(-2) != k.size(-2))
    throw ShapeError(cat(op, ": k ", k.shape(), " and v ", v.shape(), " have different numbers of keys"));
}

// Scaled dot-product attention.   q: (B, ..., T_q, D), k: (B, ..., T_k, D), v: (B, ..., T_k, D_v)
//   S = q kᵀ / √D            (B, ..., T_q, T_k)    q is scaled first, as PyTorch's MHA does
//   S = S masked by the masks (-inf where hidden, + where float)
//   P = softmax(S) per row   (B, ..., T_q, T_k)    an all -inf row gives zeros
//   out = dropout(P) v       (B, ..., T_q, D_v)
// The gradient comes from the ops' own rules: a hidden score gets none (masked_fill), a zero row of P none.
AttentionResult scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                             const Tensor& key_padding_mask, double dropout_p, bool training,
                                             Generator* rng) {
  const char* op = "scaled_dot_product_attention";
  check_query_key_value(op, q, k, v);
  const int rank = q.dim();
  if (!(dropout_p >= 0 && dropout_p < 1)) throw ValueError(cat(op, ": dropout_p must be in [0, 1), got ", dropout_p));
  const bool drop = training && dropout_p > 0;
  if (drop && rng == nullptr) throw ValueError(cat(op, ": dropout_p = ", dropout_p, " in training needs a generator"));

  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor scores = matmul(q * scale, transpose(k, -2, -1));  // (B, ..., T_q, T_k)
  if (attn_mask.defined()) scores = apply_mask(scores, attn_mask, "attn_mask");
  if (key_padding_mask.defined()) {
    const int64_t T_k = k.size(-2);
    check_key_padding_mask(op, key_padding_mask, q, k);
    // (B, T_k) -> (B, 1, ..., 1, T_k): the same pad keys for every head and every query.
    std::vector<int64_t> shape(rank, 1);
    shape.front() = q.size(0);
    shape.back() = T_k;
    scores = apply_mask(scores, reshape(key_padding_mask, shape), "key_padding_mask");
  }
  const Tensor weights = softmax(scores, -1);
  const Tensor mixed = drop ? dropout(weights, dropout_p, true, *rng) : weights;
  return {matmul(mixed, v), mixed};
}

Tensor causal_mask(int64_t T) {
  if (T < 0) throw ValueError(cat("causal_mask: T must be >= 0, got ", T));
  std::vector<int> values(static_cast<size_t>(T * T));
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = i + 1; j < T; ++j) values[i * T + j] = 1;
  return mask(values, {T, T});
}

MultiHeadAttention::MultiHeadAttention(const MultiHeadAttentionOptions& options, Generator& gen,
                                       std::shared_ptr<Generator> dropout_rng)
    : options_(options), dropout_rng_(std::move(dropout_rng)) {
  const int64_t C = options.d_model, H = options.n_heads;
  if (C <= 0 || H <= 0)
    throw ValueError(cat("MultiHeadAttention: d_model and n_heads must be positive, got ", C, " and ", H));
  if (C % H != 0)
    throw ValueError(cat("MultiHeadAttention: d_model ", C, " is not divisible by n_heads ", H,
                         " (each head takes d_model / n_heads dims)"));
  if (!(options.dropout >= 0 && options.dropout < 1))
    throw ValueError(cat("MultiHeadAttention: dropout must be in [0, 1), got ", options.dropout));
  if (!(std::isfinite(options.temperature) && options.temperature > 0))
    throw ValueError(cat("MultiHeadAttention: temperature must be finite and > 0, got ", options.temperature));
  if (options.dropout > 0 && !dropout_rng_)
    throw ValueError(cat("MultiHeadAttention: dropout ", options.dropout, " needs a generator, got a null rng"));

  // Registration order = PyTorch's state_dict order: in_proj_weight, in_proj_bias, out_proj.{weight,bias}.
  in_proj_weight = register_parameter("in_proj_weight", empty({3 * C, C}));
  xavier_uniform_(in_proj_weight, gen);  // fans of [3C, C]: bound √(6 / (C + 3C)), as PyTorch
  if (options.bias) in_proj_bias = register_parameter("in_proj_bias", zeros({3 * C}));
  out_proj_ = &register_module("out_proj", std::make_unique<Linear>(C, C, options.bias, gen));
  if (options.bias) zeros_(out_proj_->bias);
}

// query (B, T_q, C), key/value (B, T_k, C)
//   q = query W_qᵀ + b_q, k = key W_kᵀ + b_k, v = value W_vᵀ + b_v     (W_q, W_k, W_v: row blocks of in_proj)
//   (B, T, C) -> view (B, T, H, D) -> transpose (B, H, T, D)           weight splitting: no per-head layers
//   out_h = scaled_dot_product_attention(q_h, k_h, v_h)                (B, H, T_q, D)
//   (B, H, T_q, D) -> transpose (B, T_q, H, D) -> reshape (B, T_q, C) -> out_proj
AttentionResult MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                            const Tensor& attn_mask, const Tensor& key_padding_mask,
                                            bool need_weights, const PositionalEncoding* positions) const {
  const ScopeName scope = enter_scope();
  const int64_t C = options_.d_model, H = options_.n_heads, D = head_dim();
  if (query.dim() != 3 || key.dim() != 3 || value.dim() != 3 || query.size(-1) != C || key.size(-1) != C ||
      value.size(-1) != C)
    throw ShapeError(cat("MultiHeadAttention: query ", query.shape(), ", key ", key.shape(), ", value ", value.shape(),
                         " must be (B, T, C) with C = d_model = ", C));
  if (!(key.shape() == value.shape()) || key.size(0) != query.size(0))
    throw ShapeError(cat("MultiHeadAttention: key ", key.shape(), " and value ", value.shape(),
                         " must have one shape, and the batch of query ", query.shape()));
  const int64_t B = query.size(0), T_q = query.size(1), T_k = key.size(1);

  // Self-attention without dropout and with masks that take no gradient runs as one fused op on the
  // packed projection (autograd/ops/attention.cpp): the same function without the per-head copies and
  // score tensors. Returned weights are then data, so weights wanted under grad take the composed path.
  auto no_grad_mask = [](const Tensor& m, int rank) { return !m.defined() || (m.dim() == rank && !m.requires_grad()); };
  const bool self = query.same(key) && key.same(value);
  // The fused op has neither the positional hooks nor a temperature.
  const bool hooked = positions != nullptr && positions->acts_in_attention();
  const bool fused = self && !hooked && options_.temperature == 1.0 && !(is_training() && options_.dropout > 0) &&
                     !(need_weights && grad_enabled()) && no_grad_mask(attn_mask, 2) &&
                     no_grad_mask(key_padding_mask, 2);
  Tensor qkv, q, k, v;
  auto rows = [&](const Tensor& t, int64_t from, int64_t to) { return t.defined() ? slice(t, 0, from, to) : Tensor{}; };
  if (self) {
    // Self-attention: one product with the whole [3C, C] weight, then three views of width C.
    qkv = project(query, in_proj_weight, in_proj_bias);
    if (!fused) {
      const std::vector<Tensor> parts = split(qkv, C, -1);
      q = parts[0], k = parts[1], v = parts[2];
    }
  } else {
    q = project(query, rows(in_proj_weight, 0, C), rows(in_proj_bias, 0, C));
    if (key.same(value)) {
      const std::vector<Tensor> kv =
          split(project(key, rows(in_proj_weight, C, 3 * C), rows(in_proj_bias, C, 3 * C)), C, -1);
      k = kv[0], v = kv[1];
    } else {
      k = project(key, rows(in_proj_weight, C, 2 * C), rows(in_proj_bias, C, 2 * C));
      v = project(value, rows(in_proj_weight, 2 * C, 3 * C), rows(in_proj_bias, 2 * C, 3 * C));
    }
  }
  auto split_heads = [&](const Tensor& t, int64_t T) { return transpose(reshape(t, {B, T, H, D}), 1, 2); };

  Tensor mask = attn_mask;
  if (mask.defined()) {
    if (mask.dim() == 2) {
      if (mask.size(0) != T_q || mask.size(1) != T_k)
        throw ShapeError(
            cat("MultiHeadAttention: attn_mask ", mask.shape(), " must be (T_q, T_k) = [", T_q, ",", T_k, "]"));
    } else if (mask.dim() == 3) {
      if (mask.size(0) != B * H || mask.size(1) != T_q || mask.size(2) != T_k)
        throw ShapeError(cat("MultiHeadAttention: attn_mask ", mask.shape(), " must be (B·H, T_q, T_k) = [", B * H, ",",
                             T_q, ",", T_k, "]"));
      mask = reshape(mask, {B, H, T_q, T_k});  // PyTorch's layout: index b·H + h
    } else {
      throw ShapeError(cat("MultiHeadAttention: attn_mask ", mask.shape(), " must be 2-D or 3-D"));
    }
  }
  if (key_padding_mask.defined() &&
      (key_padding_mask.dim() != 2 || key_padding_mask.size(0) != B || key_padding_mask.size(1) != T_k))
    throw ShapeError(cat("MultiHeadAttention: key_padding_mask ", key_padding_mask.shape(), " must be (B, T_k) = [", B,
                         ",", T_k, "]"));

  if (fused) {
    FusedAttention heads = fused_self_attention(qkv, H, attn_mask, key_padding_mask, need_weights);
    return {out_proj_->forward(heads.output), need_weights ? heads.weights : Tensor{}};
  }
  Tensor q_heads = split_heads(q, T_q), k_heads = split_heads(k, T_k);  // (B, H, T_q, D), (B, H, T_k, D)
  if (hooked) {
    std::tie(q_heads, k_heads) = positions->rotate_query_key(q_heads, k_heads);
    mask = with_bias(mask, positions->attention_bias(H, T_q, T_k, q_heads.dtype()));
  }
  // softmax(q kᵀ / (√D τ)): q / τ goes in where scaled_dot_product_attention scales q by 1/√D. At τ = 1
  // nothing is multiplied, so the standard attention is unchanged to the bit.
  if (options_.temperature != 1.0) q_heads = q_heads * (1.0 / options_.temperature);
  AttentionResult heads = scaled_dot_product_attention(q_heads, k_heads, split_heads(v, T_k), mask, key_padding_mask,
                                                       options_.dropout, is_training(), dropout_rng_.get());
  const Tensor merged = reshape(transpose(heads.output, 1, 2), {B, T_q, C});
  return {out_proj_->forward(merged), need_weights ? heads.weights : Tensor{}};
}

namespace {

// Gradient checks, built from fixed seeds and converted to the check's dtype (float64 by default), dropout 0.
// Masks are fixed: the key-padding mask pads key 0 of batch 1, so with the causal mask query 0 of batch 1
// sees no key at all (a zero row, whose gradient must be zero too).
Tensor padding_mask_2x4() { return mask({0, 0, 0, 1, 1, 0, 0, 0}, {2, 4}); }

GradcheckCase mha_case(std::string name, MultiHeadAttentionOptions options, Shape query_shape, Shape memory_shape,
                       bool distinct_value, Tensor attn_mask, Tensor key_padding_mask) {
  const bool self = memory_shape.empty();
  std::vector<CheckedInput> inputs{{"query", query_shape}};
  if (!self) inputs.push_back({"key", memory_shape});
  if (!self && distinct_value) inputs.push_back({"value", memory_shape});
  return module_case<MultiHeadAttention>(
      std::move(name),
      [options](Generator& gen) { return std::make_unique<MultiHeadAttention>(options, gen, nullptr); }, inputs,
      [=](const MultiHeadAttention& layer, const std::vector<Tensor>& in) {
        const Tensor& key = self ? in[0] : in[1];
        const Tensor& value = self ? in[0] : distinct_value ? in[2] : in[1];
        return layer.forward(in[0], key, value, attn_mask, key_padding_mask).output;
      },
      211);
}

// One initialiser runs every registration of this file when the library loads.
const bool registered = [] {
  register_component<AttentionKind>(
      {.name = "softmax",
       .help = "multi-head softmax(q kᵀ / √D) v (PyTorch's nn.MultiheadAttention)",
       .make = [](const EncoderLayerOptions& o, Generator& init,
                  std::shared_ptr<Generator> dropout_rng) -> std::unique_ptr<SelfAttention> {
         return std::make_unique<MultiHeadAttention>(
             MultiHeadAttentionOptions{o.d_model, o.n_heads, true, o.dropout, o.temperature}, init,
             std::move(dropout_rng));
       },
       // in_proj 3C·C + 3C, out_proj C·C + C
       .parameter_count = [](const EncoderLayerOptions& o) { return 4 * o.d_model * o.d_model + 4 * o.d_model; }});
  register_gradchecks({
      op_case("nn/sdpa/causal-key-padding", {{{2, 2, 4, 3}}, {{2, 2, 4, 3}}, {{2, 2, 4, 3}}},
              [](const std::vector<Tensor>& in) {
                return scaled_dot_product_attention(in[0], in[1], in[2], causal_mask(4), padding_mask_2x4()).output;
              }),
      // Cross shapes (T_q 3, T_k 5, D_v 2) and an additive float mask, which is itself differentiated.
      op_case("nn/sdpa/cross-float-mask", {{{2, 3, 4}}, {{2, 5, 4}}, {{2, 5, 2}}, {{3, 5}}},
              [](const std::vector<Tensor>& in) {
                return scaled_dot_product_attention(in[0], in[1], in[2], in[3]).output;
              }),
      mha_case("nn/multi_head_attention/self-masked", {6, 2}, {2, 4, 6}, {}, false, causal_mask(4), padding_mask_2x4()),
      mha_case("nn/multi_head_attention/cross", {6, 3}, {2, 3, 6}, {2, 5, 6}, false, {},
               mask({0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, {2, 5})),
      mha_case("nn/multi_head_attention/cross-distinct-kv-no-bias", {4, 2, false}, {2, 2, 4}, {2, 3, 4}, true,
               mask({0, 0, 1, 0, 0, 0}, {2, 3}), {}),
  });
  return true;
}();

}  // namespace

}  // namespace tapegrad::nn
