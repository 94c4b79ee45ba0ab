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
#include "autograd/ops/flash_attention.h"
#include "autograd/ops/indexing.h"
#include "autograd/ops/matmul.h"
#include "autograd/ops/softmax.h"
#include "autograd/ops/views.h"
#include "autograd/tape.h"
#include "nn/encoder.h"
#include "nn/init.h"
#include "nn/kv_cache.h"

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
    scores = apply_mask(scores, reshape(key_padding_mask, Shape(shape)), "key_padding_mask");
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

SettingSpec causal_setting() {
  return {.name = "causal", .type = SettingType::flag, .default_value = false,
          .help = "each position attends to itself and earlier positions only (GPT-style)", .old_key = "causal"};
}

Tensor with_causal_mask(const Tensor& attn_mask, int64_t T) {
  const Tensor causal = causal_mask(T);
  if (!attn_mask.defined()) return causal;
  if (attn_mask.dtype() != DType::boolean)
    return masked_fill(attn_mask, causal, -std::numeric_limits<double>::infinity());
  // Bool masks are data (masked_fill takes floats only): the union element by element, key j > query i.
  const Tensor given = attn_mask.contiguous();
  if (given.dim() < 2 || given.size(-1) != T || given.size(-2) != T)
    throw ShapeError(cat("with_causal_mask: attn_mask ", given.shape(), " must end in (T, T) = [", T, ",", T,
                         "] to combine with the causal mask"));
  std::vector<int> values(static_cast<size_t>(given.numel()));
  const bool* hidden = given.data<bool>();
  for (int64_t n = 0; n < given.numel(); ++n) values[n] = hidden[n] || n % T > (n / T) % T;
  return mask(values, given.shape());
}

MultiHeadAttention::MultiHeadAttention(const MultiHeadAttentionOptions& options, Generator& gen,
                                       std::shared_ptr<Generator> dropout_rng)
    : QkvAttention("MultiHeadAttention", options.d_model, options.n_heads, options.bias, gen),
      options_(options),
      dropout_rng_(std::move(dropout_rng)) {
  if (!(options.dropout >= 0 && options.dropout < 1))
    throw ValueError(cat("MultiHeadAttention: dropout must be in [0, 1), got ", options.dropout));
  if (!(std::isfinite(options.temperature) && options.temperature > 0))
    throw ValueError(cat("MultiHeadAttention: temperature must be finite and > 0, got ", options.temperature));
  if (options.dropout > 0 && !dropout_rng_)
    throw ValueError(cat("MultiHeadAttention: dropout ", options.dropout, " needs a generator, got a null rng"));
}

AttentionResult MultiHeadAttention::attend(const Tensor& x, const Tensor& attn_mask, const Tensor& key_padding_mask,
                                           bool need_weights, const PositionalEncoding* positions) const {
  return run(x, x, x, attn_mask, options_.causal, key_padding_mask, need_weights, positions);
}

// x holds positions [s, s + T) after the s cached ones; L = s + T keys in all.
//   q, k, v = split_packed(project_packed(x))                     (B, H, T, D) each
//   hooks at their positions: q from s, k from s; the bias of queries from s against keys from 0
//   cache += k, v                                                  keys, values: (B, H, L, D)
//   query i sees key j iff j <= s + i                              (T, L) bool mask, none for T = 1
//   out = merge_heads(softmax(q kᵀ / (√D τ) + bias + mask) v)     (B, T, C)
Tensor MultiHeadAttention::attend_cached(const Tensor& x, KeyValueCache& cache,
                                         const PositionalEncoding* positions) const {
  const ScopeName scope = enter_scope();
  NoGradGuard inference;
  check_inputs(x, x, x);
  const int64_t start = cache.length(), T = x.size(1), L = start + T;
  auto [q, k, v] = split_packed(project_packed(x));
  Tensor bias;
  if (positions != nullptr && positions->acts_in_attention()) {
    std::tie(q, k) = positions->rotate_query_key_from(q, k, start, start);
    bias = positions->attention_bias_from(n_heads_, T, L, start, 0, q.dtype());
  }
  cache.append(k, v);
  Tensor hidden;
  if (T > 1) {
    std::vector<int> above(static_cast<size_t>(T * L));
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < L; ++j) above[static_cast<size_t>(i * L + j)] = j > start + i;
    hidden = mask(above, {T, L});
  }
  if (options_.temperature != 1.0) q = q * (1.0 / options_.temperature);
  return merge_heads(scaled_dot_product_attention(q, cache.keys(), cache.values(), with_bias(hidden, bias)).output);
}

void MultiHeadAttention::check_inputs(const Tensor& query, const Tensor& key, const Tensor& value) const {
  const int64_t C = d_model_;
  if (query.dim() != 3 || key.dim() != 3 || value.dim() != 3 || query.size(-1) != C || key.size(-1) != C ||
      value.size(-1) != C)
    throw ShapeError(cat("MultiHeadAttention: query ", query.shape(), ", key ", key.shape(), ", value ", value.shape(),
                         " must be (B, T, C) with C = d_model = ", C));
  if (!(key.shape() == value.shape()) || key.size(0) != query.size(0))
    throw ShapeError(cat("MultiHeadAttention: key ", key.shape(), " and value ", value.shape(),
                         " must have one shape, and the batch of query ", query.shape()));
}

Tensor MultiHeadAttention::checked_attn_mask(const Tensor& mask, int64_t B, int64_t T_q, int64_t T_k) const {
  const int64_t H = n_heads_;
  if (!mask.defined()) return mask;
  if (mask.dim() == 2) {
    if (mask.size(0) != T_q || mask.size(1) != T_k)
      throw ShapeError(
          cat("MultiHeadAttention: attn_mask ", mask.shape(), " must be (T_q, T_k) = [", T_q, ",", T_k, "]"));
    return mask;
  }
  if (mask.dim() == 3) {
    if (mask.size(0) != B * H || mask.size(1) != T_q || mask.size(2) != T_k)
      throw ShapeError(cat("MultiHeadAttention: attn_mask ", mask.shape(), " must be (B·H, T_q, T_k) = [", B * H, ",",
                           T_q, ",", T_k, "]"));
    return reshape(mask, {B, H, T_q, T_k});  // PyTorch's layout: index b·H + h
  }
  throw ShapeError(cat("MultiHeadAttention: attn_mask ", mask.shape(), " must be 2-D or 3-D"));
}

// q = query W_qᵀ + b_q, k = key W_kᵀ + b_k, v = value W_vᵀ + b_v     (W_q, W_k, W_v: row blocks of in_proj)
std::array<Tensor, 3> MultiHeadAttention::project(const Tensor& query, const Tensor& key, const Tensor& value) const {
  const int64_t C = d_model_;
  if (query.same(key) && key.same(value)) return split_packed(project_packed(query));
  const Tensor q = split_heads(project_rows(query, 0, C));
  if (key.same(value)) {
    const std::vector<Tensor> kv = split(project_rows(key, C, 3 * C), C, -1);
    return {q, split_heads(kv[0]), split_heads(kv[1])};
  }
  return {q, split_heads(project_rows(key, C, 2 * C)), split_heads(project_rows(value, 2 * C, 3 * C))};
}

AttentionResult MultiHeadAttention::attend_heads(Tensor q, Tensor k, const Tensor& v, Tensor mask,
                                                 const Tensor& key_padding_mask, bool need_weights,
                                                 const PositionalEncoding* positions) const {
  if (positions != nullptr && positions->acts_in_attention()) {
    std::tie(q, k) = positions->rotate_query_key(q, k);
    mask = with_bias(mask, positions->attention_bias(n_heads_, q.size(2), k.size(2), q.dtype()));
  }
  // softmax(q kᵀ / (√D τ)): q / τ goes in where scaled_dot_product_attention scales q by 1/√D. At τ = 1
  // nothing is multiplied, so the standard attention is unchanged to the bit.
  if (options_.temperature != 1.0) q = q * (1.0 / options_.temperature);
  AttentionResult heads = scaled_dot_product_attention(q, k, v, mask, key_padding_mask, options_.dropout,
                                                       is_training(), dropout_rng_.get());
  return {merge_heads(heads.output), need_weights ? heads.weights : Tensor{}};
}

// query (B, T_q, C), key/value (B, T_k, C)
//   q, k, v = the projections (project), (B, T, C) -> (B, H, T, D) each
//   out_h = scaled_dot_product_attention(q_h, k_h, v_h)                (B, H, T_q, D)
//   (B, H, T_q, D) -> (B, T_q, C) -> out_proj                          (merge_heads)
AttentionResult MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                            const Tensor& attn_mask, const Tensor& key_padding_mask,
                                            bool need_weights, const PositionalEncoding* positions) const {
  return run(query, key, value, attn_mask, false, key_padding_mask, need_weights, positions);
}

std::optional<FlashAttentionOptions> MultiHeadAttention::flash_options(int64_t T_q, int64_t T_k,
                                                                       const Tensor& attn_mask,
                                                                       const Tensor& key_padding_mask, bool causal,
                                                                       bool need_weights,
                                                                       const PositionalEncoding* positions) const {
  const bool bool_padding = !key_padding_mask.defined() || key_padding_mask.dtype() == DType::boolean;
  if (T_k < kFlashAttentionMinKeys || need_weights || attn_mask.defined() || !bool_padding) return std::nullopt;
  FlashAttentionOptions options;
  if (positions != nullptr && positions->acts_in_attention()) {
    std::optional<std::vector<double>> slopes = positions->attention_bias_slopes(n_heads_, T_q, T_k);
    if (!slopes) return std::nullopt;  // a bias only a (T_q, T_k) tensor can give
    options.alibi_slopes = std::move(*slopes);
  }
  // softmax(q kᵀ / (√D τ) + bias): the bias is not divided by τ, as in attend_heads.
  options.scale = 1.0 / (std::sqrt(static_cast<double>(head_dim())) * options_.temperature);
  options.causal = causal;
  options.key_padding_mask = key_padding_mask;
  if (is_training() && options_.dropout > 0) {
    options.dropout_p = options_.dropout;
    options.dropout_rng = dropout_rng_.get();
  }
  return options;
}

AttentionResult MultiHeadAttention::run(const Tensor& query, const Tensor& key, const Tensor& value,
                                        const Tensor& attn_mask, bool causal, const Tensor& key_padding_mask,
                                        bool need_weights, const PositionalEncoding* positions) const {
  const ScopeName scope = enter_scope();
  check_inputs(query, key, value);
  const int64_t B = query.size(0), T_q = query.size(1), T_k = key.size(1);
  const Tensor given_mask = checked_attn_mask(attn_mask, B, T_q, T_k);
  check_key_padding(key_padding_mask, B, T_k);
  // Long sequences: flash attention (autograd/ops/flash_attention.h), which never builds a (T_q, T_k)
  // matrix, with the causal mask as block skipping and the hooks inside its blocks.
  if (auto flash = flash_options(T_q, T_k, attn_mask, key_padding_mask, causal, need_weights, positions)) {
    const bool hooked = positions != nullptr && positions->acts_in_attention();
    // Self-attention whose q and k are not turned (no hook, or ALiBi's bias alone) reads its heads in place
    // from the packed projection, and its backward writes the packed gradient without per-head buffers.
    if (query.same(key) && key.same(value)) {
      const Tensor packed = project_packed(query);
      if (hooked) {
        const auto [q, k, v] = split_packed(packed);
        const auto [rotated_q, rotated_k] = positions->rotate_query_key(q, k);
        if (!rotated_q.same(q) || !rotated_k.same(k))
          return {merge_heads(flash_attention(rotated_q, rotated_k, v, *flash)), Tensor{}};
      }
      return {merge_heads(flash_self_attention(packed, n_heads_, *flash)), Tensor{}};
    }
    auto [q, k, v] = project(query, key, value);
    if (hooked) std::tie(q, k) = positions->rotate_query_key(q, k);
    return {merge_heads(flash_attention(q, k, v, *flash)), Tensor{}};
  }
  const Tensor full_mask = causal ? with_causal_mask(attn_mask, T_q) : attn_mask;
  const Tensor mask = causal ? checked_attn_mask(full_mask, B, T_q, T_k) : given_mask;

  // Self-attention without dropout and with masks that take no gradient runs as one fused op on the
  // packed projection (autograd/ops/attention.cpp): the same function without the per-head copies and
  // score tensors. Returned weights are then data, so weights wanted under grad take the composed path.
  // The fused op has neither the positional hooks nor a temperature.
  auto no_grad_mask = [](const Tensor& m) { return !m.defined() || (m.dim() == 2 && !m.requires_grad()); };
  const bool hooked = positions != nullptr && positions->acts_in_attention();
  const bool fused = query.same(key) && key.same(value) && !hooked && options_.temperature == 1.0 &&
                     !(is_training() && options_.dropout > 0) && !(need_weights && grad_enabled()) &&
                     no_grad_mask(full_mask) && no_grad_mask(key_padding_mask);
  if (fused) {
    FusedAttention heads = fused_self_attention(project_packed(query), n_heads_, full_mask, key_padding_mask, need_weights);
    return {out_proj_->forward(heads.output), need_weights ? heads.weights : Tensor{}};
  }
  const auto [q, k, v] = project(query, key, value);
  return attend_heads(q, k, v, mask, key_padding_mask, need_weights, positions);
}

}  // namespace tapegrad::nn
