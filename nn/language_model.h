#pragma once
// LanguageModel: a decoder-only transformer (GPT) that gives every position the logits of the next token.
//   x = dropout(embed(ids) + pos_embed(T))            (B, T, C)   (no sum when pos_embed adds nothing)
//   x = encoder(x) with the causal mask, final norm    (B, T, C)   position t sees positions 0..t only
//   logits = head(x)                                   (B, T, V)   head: C -> V without bias
// The encoder layers are the classifier's (nn/encoder.h) with the same named components (positional,
// attention, norm, ffn, activation, chosen by name with their settings); the attention's causal setting is
// always on.
// State names are those of a PyTorch module with attributes embed (nn.Embedding), pos_embed (nn.Embedding,
// learned positions only), encoder (nn.TransformerEncoder of nn.TransformerEncoderLayer(batch_first=True),
// norm = nn.LayerNorm) and head (nn.Linear(C, V, bias=False)), run with a causal mask, so PyTorch's
// load_state_dict(strict=True) accepts them (docs/checkpoints.md).
// Tied embeddings (options.tie_embeddings, as GPT-2): the head's weight IS the embedding's table, one (V, C)
// tensor in both layouts (Embedding's [V, C], Linear's [out, in] = [V, C]), as PyTorch's
// `model.head.weight = model.embed.weight`: state_dict() holds it as embed.weight and head.weight (PyTorch's
// has both, and its strict load wants both), named_parameters() once, as embed.weight; its gradient sums the
// lookup's scatter and the head's product.
// Letters: B batch, T positions, C = d_model, V vocab.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/classifier.h"
#include "nn/components.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/encoder.h"
#include "nn/kv_cache.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace tapegrad::nn {

/// A language model's sizes and components. The defaults are a small GPT: pre-LN, GELU.
struct LanguageModelOptions {
  int64_t vocab_size = 0;  // V
  int64_t d_model = 64;
  int64_t n_heads = 4;
  int64_t d_ff = 256;
  int64_t n_layers = 2;
  int64_t context_length = 128;  // the longest T accepted: the window the model is trained on
  double dropout = 0.1;          // after the embedding sum, and everywhere in the encoder layers
  bool norm_first = true;        // pre-LN, as GPT-2; false: post-LN
  // The head's weight is the embedding's table (one tensor, V·C parameters fewer), which keeps the
  // embedding's initialisation N(0, 1): what `head.weight = embed.weight` gives on PyTorch's default modules.
  bool tie_embeddings = false;
  // Registered components (nn/components.h) by name; pooling has no place in a language model.
  std::string positional = "learned";
  std::string attention = "softmax";
  std::string norm = "layernorm";
  std::string ffn = "dense";
  std::string activation = "gelu";
  // The chosen variants' settings (nn/settings.h); attention.causal is set by the model itself.
  ComponentSettings settings = {};
};

/// The options every component is built from (components.h takes ClassifierOptions): the same sizes and
/// names, a final norm, no padding row, the attention's causal setting on. num_classes and pool, which a
/// language model has no use for, hold valid values that nothing reads.
ClassifierOptions body_options(const LanguageModelOptions& options);

/// The inverse of body_options: the sizes, names and settings of body (what an LM needs of a classifier's
/// options: num_classes, pool, final_norm and pad_id are not read). A classifier has no head to tie:
/// tie_embeddings is false, for the caller to set.
LanguageModelOptions language_model_options(const ClassifierOptions& body);

/// validate(body_options(options)) (every size, name, setting and refusal, as the classifier's), with a
/// causal setting the chosen attention must declare: "attention = 'x' cannot hide later positions (no
/// causal setting): a language model needs it". The LanguageModel constructor calls it.
void validate(const LanguageModelOptions& options, const std::string& context = "LanguageModel");
void validate(const LanguageModelOptions& options, const std::string& context, const FieldNames& names);

/// The parameter elements LanguageModel(options) has, from the options alone (the tied head's V·C counted once,
/// in the embedding).
int64_t parameter_count(const LanguageModelOptions& options);

/// The smallest language model worth checking: vocab 7, d_model 4, 2 heads, d_ff 6, 2 layers, context 6.
LanguageModelOptions micro_language_model();

class LanguageModel : public Module {
 public:
  /// Parameters from init (PyTorch's default initialisation for each submodule); dropout masks from
  /// dropout_rng, which may be null only when options.dropout == 0. Children: embed, pos_embed, dropout,
  /// encoder, head. With tie_embeddings the head shares embed's weight, which takes the values a head of its own
  /// would have drawn from init (U(±1/√C)), not the embedding's N(0, 1).
  LanguageModel(const LanguageModelOptions& options, Generator& init, std::shared_ptr<Generator> dropout_rng);

  /// The next token's logits at every position. T > context_length is a ShapeError naming both. When
  /// attention_weights is given, each layer appends its (B, H, T, T) weights.
  ///   ids: int64 (B, T) -> logits (B, T, V)
  Tensor forward(const Tensor& ids, std::vector<Tensor>* attention_weights = nullptr) const;

  /// Whether forward_cached can serve this model: every layer's attention keeps a KV cache
  /// (SelfAttention::supports_kv_cache) and the positional encoding places positions from any start.
  bool supports_kv_cache() const;
  /// One empty cache per layer, each with room for the context length.
  std::vector<KeyValueCache> make_kv_caches() const;
  /// The next token's logits at the positions after the cached ones, without the tape, equal to forward's at
  /// those positions over the whole sequence: ids holds positions [s, s + T), s = the caches' length, whose
  /// keys and values are appended. s + T > context_length is a ShapeError; a model that cannot keep a cache
  /// (supports_kv_cache) a ValueError.   ids: int64 (B, T) -> logits (B, T, V)
  Tensor forward_cached(const Tensor& ids, std::vector<KeyValueCache>& caches) const;

  /// The sum of the layers' auxiliary losses from the last forward (moe's load balancing), already weighted;
  /// undefined when no layer has one.   -> () scalar
  Tensor auxiliary_loss() const;

  const LanguageModelOptions& options() const { return options_; }
  std::shared_ptr<Generator> dropout_rng() const { return dropout_rng_; }
  const Embedding& embed() const { return *embed_; }
  const PositionalEncoding& pos_embed() const { return *pos_embed_; }
  const Dropout& dropout() const { return *dropout_; }
  const TransformerEncoder& encoder() const { return *encoder_; }
  TransformerEncoder& encoder() { return *encoder_; }
  const Linear& head() const { return *head_; }

 private:
  LanguageModelOptions options_;
  std::shared_ptr<Generator> dropout_rng_;
  // Owned by the children list.
  Embedding* embed_;
  PositionalEncoding* pos_embed_;
  Dropout* dropout_;
  TransformerEncoder* encoder_;
  Linear* head_;
};

}  // namespace tapegrad::nn
