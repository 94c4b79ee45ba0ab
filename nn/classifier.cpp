#include "nn/classifier.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/indexing.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/views.h"
#include "autograd/registry.h"

namespace tapegrad::nn {

Pooling parse_pooling(const std::string& name) {
  if (name == "mean") return Pooling::mean;
  if (name == "cls") return Pooling::cls;
  throw ValueError(cat("unknown pooling '", name, "': expected 'mean' or 'cls'"));
}

const char* pooling_name(Pooling pooling) { return pooling == Pooling::mean ? "mean" : "cls"; }

Positional parse_positional(const std::string& name) {
  if (name == "learned") return Positional::learned;
  if (name == "sinusoidal") return Positional::sinusoidal;
  throw ValueError(cat("unknown positional encoding '", name, "': expected 'learned' or 'sinusoidal'"));
}

const char* positional_name(Positional positional) {
  return positional == Positional::learned ? "learned" : "sinusoidal";
}

namespace {

/// The parameter count in 128 bits: with every size validated (<= 2^24, n_layers <= 2^16) no term
/// overflows here, and the caller compares the total with INT64_MAX.
unsigned __int128 parameter_count_128(const ClassifierOptions& o) {
  using U = unsigned __int128;
  const U V = static_cast<U>(o.vocab_size), C = static_cast<U>(o.d_model), F = static_cast<U>(o.d_ff),
          L = static_cast<U>(o.context_length), K = static_cast<U>(o.num_classes);
  // per layer: in_proj 3C·C + 3C, out_proj C·C + C, linear1 F·C + F, linear2 C·F + C, norm1 and norm2 2C each
  const U layer = 4 * C * C + 2 * C * F + F + 9 * C;
  U total = V * C + static_cast<U>(o.n_layers) * layer + K * C + K;
  if (o.positional == Positional::learned) total += L * C;
  if (o.final_norm) total += 2 * C;
  return total;
}

}  // namespace

void validate(const ClassifierOptions& o, const std::string& context) {
  const auto fail = [&](const char* field, auto value, const std::string& what) {
    return ValueError(cat(context, ": ", field, " = ", value, " ", what));
  };
  const std::pair<const char*, int64_t> sizes[] = {{"vocab_size", o.vocab_size},
                                                   {"d_model", o.d_model},
                                                   {"d_ff", o.d_ff},
                                                   {"context_length", o.context_length}};
  for (const auto& [field, value] : sizes)
    if (value < 1 || value > kMaxClassifierSize)
      throw fail(field, value, cat("is outside [1, ", kMaxClassifierSize, "]"));
  if (o.num_classes < 2 || o.num_classes > kMaxClassifierSize)
    throw fail("num_classes", o.num_classes,
               cat("is outside [2, ", kMaxClassifierSize, "] (one class has nothing to learn)"));
  if (o.n_heads < 1) throw fail("n_heads", o.n_heads, "must be >= 1");
  if (o.d_model % o.n_heads != 0) throw fail("n_heads", o.n_heads, cat("does not divide d_model = ", o.d_model));
  if (o.n_layers < 0 || o.n_layers > kMaxClassifierLayers)
    throw fail("n_layers", o.n_layers, cat("is outside [0, ", kMaxClassifierLayers, "]"));
  if (!(o.dropout >= 0 && o.dropout < 1)) throw fail("dropout", o.dropout, "is outside [0, 1)");
  if (!(std::isfinite(o.layer_norm_eps) && o.layer_norm_eps > 0))
    throw fail("layer_norm_eps", o.layer_norm_eps, "must be finite and > 0");
  if (o.pad_id < -1 || o.pad_id >= o.vocab_size)
    throw fail("pad_id", o.pad_id, cat("is outside the vocabulary [0, ", o.vocab_size, ") (use -1 for none)"));
  const unsigned __int128 count = parameter_count_128(o);
  if (count > static_cast<unsigned __int128>(INT64_MAX))
    throw ValueError(cat(context, ": the options make more than 2^63 - 1 parameters"));
}

int64_t parameter_count(const ClassifierOptions& options) {
  validate(options);
  return static_cast<int64_t>(parameter_count_128(options));
}

SequenceClassifier::SequenceClassifier(const ClassifierOptions& options, Generator& init,
                                       std::shared_ptr<Generator> dropout_rng)
    : options_(options), dropout_rng_(std::move(dropout_rng)) {
  validate(options);
  const int64_t C = options.d_model;
  // Registration order = state order: embed, pos_embed, encoder.layers.*, encoder.norm, head.
  embed_ = &register_module("embed", std::make_unique<Embedding>(options.vocab_size, C, init, options.pad_id));
  if (options.positional == Positional::learned)
    pos_embed_ = &register_module("pos_embed", std::make_unique<PositionalEmbedding>(options.context_length, C, init));
  else
    pos_encoding_ =
        &register_module("pos_encoding", std::make_unique<SinusoidalPositionalEncoding>(options.context_length, C));
  // Dropout on the embedding sum, as GPT-2 / BERT / nanoGPT do before the first block (no parameters, so
  // the state is unaffected).
  dropout_ = &register_module("dropout", std::make_unique<Dropout>(options.dropout, dropout_rng_));
  const EncoderLayerOptions layer{C,
                                  options.n_heads,
                                  options.d_ff,
                                  options.dropout,
                                  options.activation,
                                  options.norm_first,
                                  options.layer_norm_eps};
  encoder_ = &register_module(
      "encoder", std::make_unique<TransformerEncoder>(options.n_layers, layer, options.final_norm, init, dropout_rng_));
  head_ = &register_module("head", std::make_unique<Linear>(C, options.num_classes, true, init));
}

Tensor SequenceClassifier::encode(const Tensor& ids, const Tensor& key_padding_mask,
                                  std::vector<Tensor>* attention_weights) const {
  const ScopeName scope = enter_scope();
  if (ids.dtype() != DType::int64)
    throw DTypeError(cat("SequenceClassifier: ids ", ids.shape(), " must be int64, got ", dtype_name(ids.dtype())));
  if (ids.dim() != 2) throw ShapeError(cat("SequenceClassifier: ids ", ids.shape(), " must be (B, T)"));
  const int64_t T = ids.size(1);
  if (T > options_.context_length)
    throw ShapeError(
        cat("SequenceClassifier: sequence length T = ", T, " exceeds context_length ", options_.context_length));
  if (key_padding_mask.defined() &&
      (key_padding_mask.dtype() != DType::boolean || !(key_padding_mask.shape() == ids.shape())))
    throw ShapeError(cat("SequenceClassifier: key_padding_mask ", key_padding_mask.shape(), " ",
                         dtype_name(key_padding_mask.dtype()), " must be bool of the ids' shape ", ids.shape()));
  const Tensor tokens = embed_->forward(ids);  // (B, T, C)
  const Tensor positions =
      pos_embed_ ? pos_embed_->forward(T) : pos_encoding_->forward(T, embed_->weight.dtype());  // (T, C)
  const Tensor x = dropout_->forward(tokens + positions);
  return encoder_->forward(x, {}, key_padding_mask, attention_weights);
}

// mean: pooled_b = sum_t [not pad_bt] x_bt / max(1, #non-pad in row b)    (an all-pad row pools to zeros)
// cls : pooled_b = x_b0
Tensor SequenceClassifier::pool(const Tensor& x, const Tensor& key_padding_mask) const {
  const ScopeName scope = enter_scope();
  if (x.dim() != 3 || x.size(1) == 0)
    throw ShapeError(cat("SequenceClassifier: pool takes (B, T, C) with T >= 1, got ", x.shape()));
  if (options_.pool == Pooling::cls) return select(x, 1, 0);
  if (!key_padding_mask.defined()) return mean(x, 1);
  const int64_t B = x.size(0), T = x.size(1);
  if (key_padding_mask.dtype() != DType::boolean || key_padding_mask.dim() != 2 || key_padding_mask.size(0) != B ||
      key_padding_mask.size(1) != T)
    throw ShapeError(cat("SequenceClassifier: key_padding_mask ", key_padding_mask.shape(),
                         " must be bool (B, T) for x ", x.shape()));
  // Pad positions are replaced by exact zeros, so their values cannot reach the sum.
  const Tensor summed = sum(masked_fill(x, unsqueeze(key_padding_mask, 2), 0.0), 1);  // (B, C)
  const Tensor pads = key_padding_mask.contiguous();
  const bool* pad = pads.data<bool>();
  Tensor counts = empty({B, 1}, x.dtype());  // kept positions per row, at least 1
  dispatch_float(x.dtype(), "SequenceClassifier", [&](auto tag) {
    using T_ = decltype(tag);
    for (int64_t b = 0; b < B; ++b) {
      int64_t kept = 0;
      for (int64_t t = 0; t < T; ++t) kept += !pad[b * T + t];
      counts.data<T_>()[b] = static_cast<T_>(std::max<int64_t>(kept, 1));
    }
  });
  return summed / counts;
}

Tensor SequenceClassifier::forward(const Tensor& ids, const Tensor& key_padding_mask,
                                   std::vector<Tensor>* attention_weights) const {
  const ScopeName scope = enter_scope();
  return head_->forward(pool(encode(ids, key_padding_mask, attention_weights), key_padding_mask));
}

namespace {

// The whole classifier at a micro size, checked over every named parameter (ids are not differentiable),
// built from a fixed seed, converted to the check's dtype (float64 by default), dropout 0. Row 1 ends in
// two pads (id 0): the pad embedding row gets no gradient, and since pad positions are hidden as keys and
// left out of the mean, central differences find none either.
GradcheckCase classifier_case(std::string name, ClassifierOptions options, std::vector<int64_t> token_ids,
                              std::vector<int> pads) {
  return {std::move(name), [=](const GradcheckOptions& check) {
            Generator init(401);
            SequenceClassifier model(options, init, nullptr);
            model.to(check.dtype);
            const Tensor id_tensor = ids(token_ids, {2, static_cast<int64_t>(token_ids.size() / 2)});
            const Tensor padding = mask(pads, id_tensor.shape());
            std::vector<Tensor> inputs;
            std::vector<std::string> names;
            for (const auto& [param_name, param] : model.named_parameters()) {
              inputs.push_back(param);
              names.push_back(param_name);
            }
            const TensorFn fn = [&model, id_tensor, padding](const std::vector<Tensor>&) {
              return model.forward(id_tensor, padding);
            };
            return gradcheck(fn, inputs, check, names);
          }};
}

ClassifierOptions micro(Pooling pool, Positional positional, bool norm_first, Activation activation) {
  ClassifierOptions o{7};
  o.d_model = 4;
  o.n_heads = 2;
  o.d_ff = 6;
  o.n_layers = 2;
  o.context_length = 6;
  o.num_classes = 3;
  o.dropout = 0.0;
  o.activation = activation;
  o.norm_first = norm_first;
  o.final_norm = norm_first;
  o.pool = pool;
  o.positional = positional;
  return o;
}

const bool registered = register_gradchecks({
    classifier_case("nn/classifier/mean-pool-padding",
                    micro(Pooling::mean, Positional::learned, false, Activation::relu), {3, 1, 4, 1, 5, 2, 6, 5, 0, 0},
                    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1}),
    // <cls> = id 1 first; pre-LN with a final norm, GELU, sinusoidal positions (no pos_embed parameter).
    classifier_case("nn/classifier/cls-pool", micro(Pooling::cls, Positional::sinusoidal, true, Activation::gelu),
                    {1, 3, 4, 5, 6, 1, 2, 6, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0, 1, 1}),
});

}  // namespace

}  // namespace tapegrad::nn
