#include "nn/linear_attention.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/indexing.h"
#include "autograd/ops/matmul.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/scan.h"
#include "autograd/ops/unary.h"
#include "autograd/ops/views.h"
#include "nn/attention.h"
#include "nn/classifier.h"
#include "nn/encoder.h"
#include "nn/init.h"
#include "nn/module_gradcheck.h"

namespace tapegrad::nn {

Tensor elu_feature_map(const Tensor& x) { return elu(x) + 1.0; }

namespace {

/// Whether m is exactly causal_mask(T): bool (T, T), true above the diagonal and false elsewhere.
bool is_causal_mask(const Tensor& m, int64_t T) {
  if (m.dtype() != DType::boolean || m.dim() != 2 || m.size(0) != T || m.size(1) != T) return false;
  const std::vector<double> values = m.to_vector();
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      if ((values[i * T + j] != 0) != (j > i)) return false;
  return true;
}

}  // namespace

// Linear attention.   q: (B, ..., T_q, D), k: (B, ..., T_k, D), v: (B, ..., T_k, D_v)
//   φq = φ(q), φk = φ(k)                 (.., T, D)       φ = elu + 1 > 0; a pad key's row of φk set to 0
//   KV = φkᵀ v                           (.., D, D_v)     Σ_j φ(k_j) v_jᵀ: the state that replaces P
//   z  = φq (Σ_j φk_j)ᵀ + eps            (.., T_q, 1)     the normaliser, each query's sum of similarities
//   out = (φq KV) / z                    (.., T_q, D_v)
// Nothing has a T_q × T_k shape. The gradient comes from the ops' own rules (elu, masked_fill, matmul,
// sum, div); a zeroed pad row of φk passes no gradient back to its key.
// Causal: the sums over j run to i only, as running sums along T (autograd/ops/scan.h):
//   S_i = Σ_{j≤i} φk_j v_jᵀ = cumsum_T(φk ⊗ v)   (.., T, D, D_v)   z_i = φq_i · cumsum_T(φk)_i + eps
//   out_i = (φq_i S_i) / z_i
Tensor linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding_mask,
                        double eps, bool causal) {
  const char* op = "linear_attention";
  check_query_key_value(op, q, k, v);
  const int rank = q.dim();
  if (!(eps >= 0)) throw ValueError(cat(op, ": eps must be >= 0, got ", eps));
  if (causal && q.size(-2) != k.size(-2))
    throw ShapeError(cat(op, ": causal needs as many queries as keys, got q ", q.shape(), " and k ", k.shape()));

  Tensor fq = elu_feature_map(q), fk = elu_feature_map(k);
  if (key_padding_mask.defined()) {
    const int64_t T_k = k.size(-2);
    if (key_padding_mask.dtype() != DType::boolean)
      throw DTypeError(cat(op, ": key_padding_mask ", key_padding_mask.shape(), " is ",
                           dtype_name(key_padding_mask.dtype()),
                           "; expected bool (true = pad): an additive float mask has no meaning without a softmax"));
    check_key_padding_mask(op, key_padding_mask, q, k);
    // (B, T_k) -> (B, 1, ..., 1, T_k, 1): a pad key's whole feature row is zero, for every head.
    std::vector<int64_t> shape(rank, 1);
    shape.front() = q.size(0);
    shape[rank - 2] = T_k;
    fk = masked_fill(fk, reshape(key_padding_mask, Shape(shape)), 0.0);
  }
  if (causal) {
    const Tensor states = cumsum(unsqueeze(fk, -1) * unsqueeze(v, -2), -3);  // (.., T, D, D_v)
    const Tensor num = squeeze(matmul(unsqueeze(fq, -2), states), -2);        // (.., T, D_v)
    const Tensor z = sum(fq * cumsum(fk, -2), -1, true) + eps;                // (.., T, 1)
    return num / z;
  }
  const Tensor kv = matmul(transpose(fk, -2, -1), v);                              // (.., D, D_v)
  const Tensor k_sum = sum(fk, -2, true);                                          // (.., 1, D)
  const Tensor z = matmul(fq, transpose(k_sum, -2, -1)) + eps;                     // (.., T_q, 1)
  return matmul(fq, kv) / z;                                                       // (.., T_q, D_v)
}

LinearAttention::LinearAttention(const LinearAttentionOptions& options, Generator& gen)
    : QkvAttention("LinearAttention", options.d_model, options.n_heads, options.bias, gen), options_(options) {
  if (!(options.eps >= 0)) throw ValueError(cat("LinearAttention: eps must be >= 0, got ", options.eps));
}

// x (B, T, C)
//   q, k, v = split(x W_inᵀ + b_in), each (B, T, C) -> (B, H, T, D)
//   out_h = linear_attention(q_h, k_h, v_h)                  (B, H, T, D)
//   (B, H, T, D) -> (B, T, C) -> out_proj
AttentionResult LinearAttention::attend(const Tensor& x, const Tensor& attn_mask, const Tensor& key_padding_mask,
                                        bool need_weights, const PositionalEncoding* positions) const {
  (void)need_weights;  // there is no (T, T) matrix to return: weights stay undefined
  const ScopeName scope = enter_scope();
  if (positions && positions->acts_in_attention())
    throw ValueError("LinearAttention: a positional encoding that acts inside attention (rotating q and k, or a "
                     "bias on the scores) is not supported: use learned or sinusoidal positions");
  if (x.dim() != 3 || x.size(-1) != d_model_)
    throw ShapeError(cat("LinearAttention: x ", x.shape(), " must be (B, T, C) with C = d_model = ", d_model_));
  const int64_t T = x.size(1);
  if (attn_mask.defined() && !is_causal_mask(attn_mask, T))
    throw ValueError(cat("LinearAttention: attn_mask ", attn_mask.shape(),
                         " is not supported: linear attention sums over the keys with running sums, which gives "
                         "the causal mask (bool (T, T), true above the diagonal) and no other pattern"));
  check_key_padding(key_padding_mask, x.size(0), T);
  const auto [q, k, v] = split_packed(project_packed(x));
  const bool causal = options_.causal || attn_mask.defined();
  return {merge_heads(linear_attention(q, k, v, key_padding_mask, options_.eps, causal)), Tensor{}};
}

namespace {

// Padding: batch 1 pads its first and last keys; batch 2 (of three) pads every key, so its output is
// 0 / eps = 0 and its gradients must be zero too (the check's finite differences see a constant).
Tensor padding_mask_3x4() { return mask({0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1, 1}, {3, 4}); }

const bool registered = [] {
  register_component<AttentionKind>(
      {.name = "linear",
       .help = "multi-head linear attention phi(q) (phi(k)ᵀ v) / (phi(q) sum phi(k)), phi = elu + 1: O(T) memory; "
               "causal by running sums",
       .make = [](const EncoderLayerOptions& o, Generator& init,
                  std::shared_ptr<Generator>) -> std::unique_ptr<SelfAttention> {
         const VariantSettings settings = settings_of<AttentionKind>(o.settings, "linear");
         return std::make_unique<LinearAttention>(
             LinearAttentionOptions{.d_model = o.d_model, .n_heads = o.n_heads, .eps = settings.real("eps"),
                                    .causal = settings.flag("causal")},
             init);
       },
       // the softmax component's parameters, under the same names
       .parameter_count = [](const EncoderLayerOptions& o) { return QkvAttention::projection_parameters(o.d_model); },
       .refuses = [](const ClassifierOptions& o) -> std::optional<Refusal> {
         if (component<PositionalKind>(o.positional).acts_in_attention)
           return Refusal{{{"attention", "linear"}, {"positional", o.positional}},
                          "linear attention forms no (T, T) scores for this encoding to rotate or bias: use learned "
                          "or sinusoidal positions, or softmax attention"};
         return std::nullopt;
       },
       // No temperature: it divides softmax scores, which linear attention never forms.
       .settings = {causal_setting(),
                    // At most 1: a larger eps outweighs the normaliser, and the output tends to 0 whatever the input.
                    {.name = "eps", .type = SettingType::real, .default_value = 1e-6, .min = 0, .max = 1, .min_open = true,
                     .help = "added to the normaliser phi(q) sum phi(k), so that a query whose keys are all padding "
                             "gives 0, not 0/0",
                     .flag = "--attention-eps"}}});
  register_gradchecks({
      // eps 0 in the op cases: the quotient is checked exactly as written (every key is kept, z > 0).
      op_case("nn/linear_attention/op", {{{2, 2, 4, 3}}, {{2, 2, 5, 3}}, {{2, 2, 5, 2}}},
              [](const std::vector<Tensor>& in) { return linear_attention(in[0], in[1], in[2], {}, 0.0); }),
      op_case("nn/linear_attention/op-key-padding", {{{3, 4, 3}}, {{3, 4, 3}}, {{3, 4, 2}}},
              [](const std::vector<Tensor>& in) {
                return linear_attention(in[0], in[1], in[2], padding_mask_3x4());
              }),
      module_case<LinearAttention>(
          "nn/linear_attention/self-key-padding",
          [](Generator& gen) { return std::make_unique<LinearAttention>(LinearAttentionOptions{6, 2}, gen); },
          {{"x", {3, 4, 6}}},
          [](const LinearAttention& layer, const std::vector<Tensor>& in) {
            return layer.attend(in[0], {}, padding_mask_3x4(), false).output;
          },
          223),
      op_case("nn/linear_attention/op-causal-key-padding", {{{3, 4, 3}}, {{3, 4, 3}}, {{3, 4, 2}}},
              [](const std::vector<Tensor>& in) {
                return linear_attention(in[0], in[1], in[2], padding_mask_3x4(), 1e-6, true);
              }),
      module_case<LinearAttention>(
          "nn/linear_attention/self-causal-key-padding",
          [](Generator& gen) { return std::make_unique<LinearAttention>(LinearAttentionOptions{6, 2}, gen); },
          {{"x", {3, 4, 6}}},
          [](const LinearAttention& layer, const std::vector<Tensor>& in) {
            return layer.attend(in[0], causal_mask(4), padding_mask_3x4(), false).output;
          },
          229),
      module_case<LinearAttention>(
          "nn/linear_attention/self-no-bias",
          [](Generator& gen) { return std::make_unique<LinearAttention>(LinearAttentionOptions{4, 1, false}, gen); },
          {{"x", {2, 3, 4}}},
          [](const LinearAttention& layer, const std::vector<Tensor>& in) {
            return layer.attend(in[0], {}, {}, false).output;
          },
          227),
  });
  return true;
}();

}  // namespace

}  // namespace tapegrad::nn
