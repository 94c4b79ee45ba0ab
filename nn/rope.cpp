#include "nn/rope.h"

#include <cmath>
#include <memory>
#include <vector>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/views.h"
#include "nn/attention.h"
#include "nn/classifier.h"
#include "nn/module_gradcheck.h"

namespace tapegrad::nn {

// x: (..., T, D), pairs p = (x_2i, x_2i+1) at position m
//   view (..., T, D/2, 2); even = [..., 0:1], odd = [..., 1:2]        (..., T, D/2, 1)
//   cos, sin of m·θ_i as constants                                     (T, D/2, 1), broadcast over ...
//   even' = even cos - odd sin,  odd' = even sin + odd cos              the 2×2 rotation of seed 003 §4.4
//   concat on the last dim -> (..., T, D/2, 2) -> (..., T, D)           pairs back in place
// The backward is the tape's: a rotation's transpose applied to the gradient, through the same ops.
Tensor rotary_embedding(const Tensor& x, double base, int64_t first_position) {
  if (x.dim() < 2) throw ShapeError(cat("rotary_embedding: x ", x.shape(), " must be (..., T, D)"));
  if (!is_floating(x.dtype()))
    throw DTypeError(cat("rotary_embedding: x ", x.shape(), " must be float32 or float64, got ", dtype_name(x.dtype())));
  const int64_t T = x.size(-2), D = x.size(-1);
  if (D % 2 != 0)
    throw ValueError(cat("rotary_embedding: x ", x.shape(), " has an odd head dim D = ", D, " (RoPE rotates pairs)"));
  const int64_t half = D / 2;
  std::vector<double> cos_table(static_cast<size_t>(T * half)), sin_table(cos_table.size());
  for (int64_t i = 0; i < half; ++i) {
    const double theta = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(D));
    for (int64_t t = 0; t < T; ++t) {
      const double m = static_cast<double>(first_position + t);
      cos_table[t * half + i] = std::cos(m * theta);
      sin_table[t * half + i] = std::sin(m * theta);
    }
  }
  const Tensor cos_m = tensor(cos_table, {T, half, 1}, x.dtype()), sin_m = tensor(sin_table, {T, half, 1}, x.dtype());

  Shape pairs = x.shape();
  pairs[pairs.rank() - 1] = half;
  pairs.push_back(2);
  const Tensor xp = reshape(x, pairs);  // (..., T, D/2, 2)
  const int64_t last = xp.dim() - 1;
  const Tensor even = slice(xp, last, 0, 1), odd = slice(xp, last, 1, 2);
  const Tensor rotated = concat({even * cos_m - odd * sin_m, even * sin_m + odd * cos_m}, last);
  return reshape(rotated, x.shape());
}

RotaryPositionalEncoding::RotaryPositionalEncoding(int64_t context_length) : context_length_(context_length) {
  if (context_length <= 0)
    throw ValueError(cat("RotaryPositionalEncoding: context_length must be positive, got ", context_length));
}

Tensor RotaryPositionalEncoding::forward(int64_t seq_len, DType) const {
  if (seq_len < 0 || seq_len > context_length_)
    throw ShapeError(cat("RotaryPositionalEncoding: sequence length ", seq_len, " is outside [0, ", context_length_,
                         "] (the context length)"));
  return {};
}

std::pair<Tensor, Tensor> RotaryPositionalEncoding::rotate_query_key(const Tensor& q, const Tensor& k) const {
  return rotate_query_key_from(q, k, 0, 0);
}

std::pair<Tensor, Tensor> RotaryPositionalEncoding::rotate_query_key_from(const Tensor& q, const Tensor& k,
                                                                          int64_t q_start, int64_t k_start) const {
  const ScopeName scope = enter_scope();
  for (const auto& [t, start] : {std::pair{&q, q_start}, std::pair{&k, k_start}})
    if (t->dim() < 2 || start < 0 || start + t->size(-2) > context_length_)
      throw ShapeError(cat("RotaryPositionalEncoding: q ", q.shape(), " from position ", q_start, ", k ", k.shape(),
                           " from position ", k_start, " must be (..., T, D) within the context length ",
                           context_length_));
  return {rotary_embedding(q, 10000.0, q_start), rotary_embedding(k, 10000.0, k_start)};
}

namespace {

// The whole micro classifier with rope positions, over every named parameter: the encoding reaches each
// layer's attention through SequenceClassifier::encode. Row 1 ends in two pads.
GradcheckCase classifier_with_rope() {
  const Tensor id_tensor = ids({3, 1, 4, 1, 5, 2, 6, 5, 0, 0}, {2, 5});
  const Tensor padding = mask({0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 5});
  return module_case<SequenceClassifier>(
      "nn/rope/classifier",
      [](Generator& init) {
        ClassifierOptions o = micro_classifier();
        o.positional = "rope";
        o.settings.set("attention", "causal", true);
        o.settings.set("attention", "temperature", 0.7);
        return std::make_unique<SequenceClassifier>(o, init, nullptr);
      },
      {},
      [id_tensor, padding](const SequenceClassifier& model, const std::vector<Tensor>&) {
        return model.forward(id_tensor, padding);
      },
      811);
}

// One initialiser runs every registration of this file when the library loads.
const bool registered = [] {
  register_component<PositionalKind>(
      {.name = "rope",
       .help = "rotary embeddings: q and k rotated by position in every attention layer (RoFormer), no parameters",
       .make = [](const ClassifierOptions& o, Generator&) -> std::unique_ptr<PositionalEncoding> {
         return std::make_unique<RotaryPositionalEncoding>(o.context_length);
       },
       .parameter_count = [](const ClassifierOptions&) { return int64_t{0}; },
       .refuses = [](const ClassifierOptions& o) -> std::optional<Refusal> {
         if ((o.d_model / o.n_heads) % 2 == 0) return std::nullopt;
         return Refusal{{{"positional", "rope"}, {"d_model", cat(o.d_model)}, {"n_heads", cat(o.n_heads)}},
                        cat("each head's width d_model / heads = ", o.d_model / o.n_heads,
                            " must be even (RoPE rotates pairs of dims)")};
       },
       .acts_in_attention = true});
  // Self-attention with rope, 2 heads of D = 4 (two frequencies per head), a causal mask and a padded key:
  // checks x and every parameter of the attention through the rotation of q and k.
  const auto rope = std::make_shared<RotaryPositionalEncoding>(8);
  register_gradchecks({
      op_case("nn/rope/rotary_embedding", {{{2, 3, 5, 6}}},
              [](const std::vector<Tensor>& in) { return rotary_embedding(in[0]); }),
      module_case<MultiHeadAttention>(
          "nn/rope/self-attention",
          [](Generator& gen) {
            return std::make_unique<MultiHeadAttention>(MultiHeadAttentionOptions{8, 2}, gen, nullptr);
          },
          {{"x", {2, 5, 8}}},
          [rope](const MultiHeadAttention& layer, const std::vector<Tensor>& in) {
            return layer.forward(in[0], in[0], in[0], causal_mask(5), mask({0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, {2, 5}),
                                 false, rope.get())
                .output;
          },
          509),
      classifier_with_rope(),
  });
  return true;
}();

}  // namespace

}  // namespace tapegrad::nn
