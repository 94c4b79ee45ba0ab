#pragma once
// SequenceClassifier: token ids -> class logits with a Transformer encoder.
//   x = dropout(embed(ids) + positions(T))            (B, T, C)
//   x = encoder(x, key_padding_mask)                   (B, T, C)
//   pooled = mean over the non-pad positions, or x[:, 0] (the caller prepends <cls>)   (B, C)
//   logits = head(pooled)                              (B, num_classes)
// Its state names are exactly those of a PyTorch module with attributes embed (nn.Embedding), pos_embed
// (nn.Embedding, learned positions only), encoder (nn.TransformerEncoder of
// nn.TransformerEncoderLayer(batch_first=True), norm = nn.LayerNorm when final_norm) and head (nn.Linear),
// so PyTorch's load_state_dict(strict=True) accepts them and the reverse.
// Letters: B batch, T positions, C = d_model, V vocab.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/activation.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/encoder.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/positions.h"

namespace tapegrad::nn {

/// How the sequence becomes one vector: the mean over the non-pad positions, or the first position's vector.
enum class Pooling { mean, cls };
/// Learned position vectors (pos_embed, a parameter) or fixed sinusoids (no parameters, not in the state).
enum class Positional { learned, sinusoidal };

/// "mean" or "cls"; anything else is a ValueError listing the choices.
Pooling parse_pooling(const std::string& name);
/// The name parse_pooling reads.
const char* pooling_name(Pooling pooling);
/// "learned" or "sinusoidal"; anything else is a ValueError listing the choices.
Positional parse_positional(const std::string& name);
/// The name parse_positional reads.
const char* positional_name(Positional positional);

struct ClassifierOptions {
  int64_t vocab_size;  // V
  int64_t d_model = 64;
  int64_t n_heads = 4;
  int64_t d_ff = 128;
  int64_t n_layers = 2;
  int64_t context_length = 64;  // the longest T accepted
  int64_t num_classes = 2;
  double dropout = 0.1;  // after the embedding sum, and everywhere in the encoder layers
  Activation activation = Activation::relu;
  bool norm_first = false;
  double layer_norm_eps = 1e-5;
  bool final_norm = false;  // a LayerNorm after the last layer (encoder.norm); usual with norm_first
  Pooling pool = Pooling::mean;
  Positional positional = Positional::learned;
  int64_t pad_id = 0;  // the embedding row that stays zero and gets no gradient; -1 for none
};

/// The largest vocab_size, d_model, d_ff, context_length and num_classes validate() accepts (2^24): far
/// beyond any model tapegrad trains, and small enough that the product of two of them (a weight's numel)
/// cannot overflow int64. n_layers is capped at kMaxClassifierLayers.
inline constexpr int64_t kMaxClassifierSize = int64_t{1} << 24;
inline constexpr int64_t kMaxClassifierLayers = int64_t{1} << 16;

/// Checks every field's range and throws a ValueError "<context>: <field> = <value> <what is wrong>" for
/// the first bad one: vocab_size, d_model, d_ff, context_length in [1, 2^24]; num_classes in [2, 2^24] (one
/// class has nothing to learn: its probability is always 1); n_heads >= 1 dividing d_model; n_layers in
/// [0, 2^16]; dropout in [0, 1); layer_norm_eps finite and > 0; pad_id in [-1, vocab_size); and the total
/// parameter count within int64. The SequenceClassifier constructor calls it; so do the config readers,
/// with the file as context.
void validate(const ClassifierOptions& options, const std::string& context = "SequenceClassifier");

/// The number of parameter elements SequenceClassifier(options) has, computed from the options alone
/// (nothing is allocated), so a reader can compare it with a weights file's size before building the
/// model. Invalid options are validate()'s ValueError.
///   V·C + [learned] L·C + n_layers·(4C² + 2CF + F + 9C) + [final_norm] 2C + K·C + K
int64_t parameter_count(const ClassifierOptions& options);

class SequenceClassifier : public Module {
 public:
  /// Parameters from init (each submodule with PyTorch's default initialisation); dropout masks from
  /// dropout_rng, which may be null only when options.dropout == 0. Children: embed, pos_embed (learned) or
  /// pos_encoding (sinusoidal), dropout, encoder, head.
  SequenceClassifier(const ClassifierOptions& options, Generator& init, std::shared_ptr<Generator> dropout_rng);

  /// Class logits. key_padding_mask (true = pad) hides the pad positions as keys and from the mean; it may
  /// be undefined (no padding). When attention_weights is given, each encoder layer appends its (B, H, T, T)
  /// weights. T > context_length is a ShapeError naming both.
  ///   ids: int64 (B, T), key_padding_mask: bool (B, T) -> logits (B, num_classes)
  Tensor forward(const Tensor& ids, const Tensor& key_padding_mask = {},
                 std::vector<Tensor>* attention_weights = nullptr) const;

  /// The encoder's output before pooling, with the same arguments as forward.   ids: (B, T) -> (B, T, C)
  Tensor encode(const Tensor& ids, const Tensor& key_padding_mask = {},
                std::vector<Tensor>* attention_weights = nullptr) const;
  /// The pooled vector of each sequence from encoded positions.   x: (B, T, C), mask: (B, T) -> (B, C)
  Tensor pool(const Tensor& x, const Tensor& key_padding_mask = {}) const;

  const ClassifierOptions& options() const { return options_; }
  std::shared_ptr<Generator> dropout_rng() const { return dropout_rng_; }
  const Embedding& embed() const { return *embed_; }
  /// The learned positions, or null with sinusoidal ones.
  const PositionalEmbedding* pos_embed() const { return pos_embed_; }
  const TransformerEncoder& encoder() const { return *encoder_; }
  const Linear& head() const { return *head_; }

 private:
  ClassifierOptions options_;
  std::shared_ptr<Generator> dropout_rng_;
  // Owned by the children list.
  Embedding* embed_;
  PositionalEmbedding* pos_embed_ = nullptr;
  SinusoidalPositionalEncoding* pos_encoding_ = nullptr;
  Dropout* dropout_;
  TransformerEncoder* encoder_;
  Linear* head_;
};

}  // namespace tapegrad::nn
