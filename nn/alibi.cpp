#include "nn/alibi.h"

#include <bit>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "nn/attention.h"
#include "nn/classifier.h"
#include "nn/module_gradcheck.h"

namespace tapegrad::nn {

std::vector<double> alibi_slopes(int64_t n_heads) {
  if (n_heads < 1) throw ValueError(cat("alibi_slopes: n_heads must be >= 1, got ", n_heads));
  // For a power of two P: ratio and first term 2^(-8/P), so m_h = 2^(-8h/P).
  const auto geometric = [](int64_t P) {
    std::vector<double> slopes(static_cast<size_t>(P));
    for (int64_t h = 1; h <= P; ++h) slopes[h - 1] = std::exp2(-8.0 * static_cast<double>(h) / static_cast<double>(P));
    return slopes;
  };
  const auto P = static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(n_heads)));
  std::vector<double> slopes = geometric(P);
  if (P == n_heads) return slopes;
  // The paper's interpolation: slopes of 2P at even indices lie between (and beyond) those of P.
  const std::vector<double> finer = geometric(2 * P);
  for (int64_t i = 0; static_cast<int64_t>(slopes.size()) < n_heads; i += 2) slopes.push_back(finer[i]);
  return slopes;
}

AlibiPositionalEncoding::AlibiPositionalEncoding(int64_t context_length) : context_length_(context_length) {
  if (context_length <= 0)
    throw ValueError(cat("AlibiPositionalEncoding: context_length must be positive, got ", context_length));
}

Tensor AlibiPositionalEncoding::forward(int64_t seq_len, DType) const {
  if (seq_len < 0 || seq_len > context_length_)
    throw ShapeError(cat("AlibiPositionalEncoding: sequence length ", seq_len, " is outside [0, ", context_length_,
                         "] (the context length)"));
  return {};
}

void AlibiPositionalEncoding::check_lengths(int64_t T_q, int64_t T_k, int64_t q_start, int64_t k_start) const {
  if (T_q < 0 || T_k < 0 || q_start < 0 || k_start < 0 || q_start + T_q > context_length_ ||
      k_start + T_k > context_length_)
    throw ShapeError(cat("AlibiPositionalEncoding: T_q = ", T_q, " from position ", q_start, ", T_k = ", T_k,
                         " from position ", k_start, " must lie in [0, ", context_length_, "] (the context length)"));
}

std::optional<std::vector<double>> AlibiPositionalEncoding::attention_bias_slopes(int64_t n_heads, int64_t T_q,
                                                                                  int64_t T_k) const {
  check_lengths(T_q, T_k);
  return alibi_slopes(n_heads);
}

Tensor AlibiPositionalEncoding::attention_bias(int64_t n_heads, int64_t T_q, int64_t T_k, DType dtype) const {
  return attention_bias_from(n_heads, T_q, T_k, 0, 0, dtype);
}

Tensor AlibiPositionalEncoding::attention_bias_from(int64_t n_heads, int64_t T_q, int64_t T_k, int64_t q_start,
                                                    int64_t k_start, DType dtype) const {
  check_lengths(T_q, T_k, q_start, k_start);
  if (!is_floating(dtype))
    throw DTypeError(cat("AlibiPositionalEncoding: dtype must be float32 or float64, got ", dtype_name(dtype)));
  const std::vector<double> slopes = alibi_slopes(n_heads);
  std::vector<double> bias(static_cast<size_t>(n_heads * T_q * T_k));
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < T_q; ++i)
      for (int64_t j = 0; j < T_k; ++j)
        bias[(h * T_q + i) * T_k + j] = -slopes[h] * static_cast<double>(std::abs((q_start + i) - (k_start + j)));
  return tensor(bias, {n_heads, T_q, T_k}, dtype);
}

namespace {

// The whole micro classifier with alibi positions, over every named parameter: the encoding reaches each
// layer's attention through SequenceClassifier::encode. Row 1 ends in two pads.
GradcheckCase classifier_with_alibi() {
  const Tensor id_tensor = ids({3, 1, 4, 1, 5, 2, 6, 5, 0, 0}, {2, 5});
  const Tensor padding = mask({0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 5});
  return module_case<SequenceClassifier>(
      "nn/alibi/classifier",
      [](Generator& init) {
        ClassifierOptions o = micro_classifier();
        o.positional = "alibi";
        o.norm_first = true;
        return std::make_unique<SequenceClassifier>(o, init, nullptr);
      },
      {},
      [id_tensor, padding](const SequenceClassifier& model, const std::vector<Tensor>&) {
        return model.forward(id_tensor, padding);
      },
      823);
}

// One initialiser runs every registration of this file when the library loads.
const bool registered = [] {
  register_component<PositionalKind>(
      {.name = "alibi",
       .help = "linear biases: -slope_h * |i - j| added to the scores of head h (Press et al. 2022), no parameters",
       .make = [](const ClassifierOptions& o, Generator&) -> std::unique_ptr<PositionalEncoding> {
         return std::make_unique<AlibiPositionalEncoding>(o.context_length);
       },
       .parameter_count = [](const ClassifierOptions&) { return int64_t{0}; },
       .acts_in_attention = true});
  // Self-attention with the biases of 3 heads (an interpolated slope set) under a bool key-padding mask and
  // a causal bool mask, which with_bias turns into one float mask: checks x and every parameter.
  const auto alibi = std::make_shared<AlibiPositionalEncoding>(8);
  register_gradchecks({module_case<MultiHeadAttention>(
      "nn/alibi/self-attention",
      [](Generator& gen) { return std::make_unique<MultiHeadAttention>(MultiHeadAttentionOptions{6, 3}, gen, nullptr); },
      {{"x", {2, 5, 6}}},
      [alibi](const MultiHeadAttention& layer, const std::vector<Tensor>& in) {
        return layer.forward(in[0], in[0], in[0], causal_mask(5), mask({0, 0, 0, 0, 1, 0, 0, 0, 0, 0}, {2, 5}), false,
                             alibi.get())
            .output;
      },
      613),
      classifier_with_alibi()});
  return true;
}();

}  // namespace

}  // namespace tapegrad::nn
