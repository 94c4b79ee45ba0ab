#pragma once
// SequenceClassifier: token ids -> class logits with a Transformer encoder.
//   x = dropout(embed(ids) + pos_embed(T))            (B, T, C)   (no sum when pos_embed adds nothing)
//   x = encoder(x, key_padding_mask)                   (B, T, C)
//   pooled = pool(x, key_padding_mask)                 (B, C)
//   logits = head(pooled)                              (B, num_classes)
// pos_embed, pool and the encoder layers' attention, norm, feed-forward block and activation are named
// components (nn/components.h), chosen by the names in ClassifierOptions. With the built-in ones its state
// names are exactly those of a PyTorch module with attributes embed (nn.Embedding), pos_embed
// (nn.Embedding, learned positions only), encoder (nn.TransformerEncoder of
// nn.TransformerEncoderLayer(batch_first=True), norm = nn.LayerNorm when final_norm) and head (nn.Linear),
// so PyTorch's load_state_dict(strict=True) accepts them and the reverse.
// Letters: B batch, T positions, C = d_model, V vocab.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/components.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/encoder.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace tapegrad::nn {

/// What every classifier has: sizes, dropout, where the norms go, the padding row, the components by name and
/// their settings. A variant's own settings (moe's experts, the attention's causal and temperature, a norm's
/// eps) are not fields here: they are declared with the variant and given in `settings` (nn/settings.h).
struct ClassifierOptions {
  int64_t vocab_size = 0;  // V
  int64_t d_model = 64;
  int64_t n_heads = 4;
  int64_t d_ff = 128;
  int64_t n_layers = 2;
  int64_t context_length = 64;  // the longest T accepted
  int64_t num_classes = 2;
  double dropout = 0.1;  // after the embedding sum, and everywhere in the encoder layers
  bool norm_first = false;
  bool final_norm = false;  // a norm after the last layer (encoder.norm); usual with norm_first
  int64_t pad_id = 0;       // the embedding row that stays zero and gets no gradient; -1 for none
  // Registered components (nn/components.h) by name.
  std::string positional = "learned";
  std::string attention = "softmax";
  std::string norm = "layernorm";
  std::string ffn = "dense";
  std::string pool = "mean";
  std::string activation = "relu";
  // The chosen variants' settings, by kind: settings.set("norm", "eps", 1e-6). Absent: the default.
  ComponentSettings settings = {};
};

/// Rows of a padded batch that run together, each group cut to its longest row's length
/// (SequenceClassifier::forward). Flat, so that refilling it allocates nothing in steady state.
struct LengthGroups {
  std::vector<int64_t> rows;     // group g's rows, ascending: rows[starts[g]] .. rows[starts[g + 1] - 1]
  std::vector<int64_t> starts;   // size() + 1 entries
  std::vector<int64_t> lengths;  // group g's positions: its longest row's length
  std::vector<int64_t> row_lengths;  // row b's length: one past its last non-pad position, at least 1
  size_t size() const { return lengths.size(); }
  void clear() {
    rows.clear();
    starts.clear();
    lengths.clear();
    row_lengths.clear();
  }
};

/// Fills `groups` with the groups forward runs a padded batch as, or leaves it empty when the batch runs
/// whole: its T is under kLengthGroupsFromPositions, or grouping would save less than
/// 1/kLengthGroupsSaveFrom of the positions. Rows sorted by length (one past the last non-pad position, at
/// least 1), longest first, join the open group while their length is at least kLengthGroupShare of its
/// longest.   key_padding_mask: bool (B, T), true = pad
void length_groups(const Tensor& key_padding_mask, LengthGroups& groups);
/// Below this T a batch runs whole: short steps, where more and smaller ops cost more than the padding.
inline constexpr int64_t kLengthGroupsFromPositions = 128;
inline constexpr int64_t kLengthGroupsSaveFrom = 8;
inline constexpr double kLengthGroupShare = 0.75;

/// The smallest classifier worth checking: vocab 7, d_model 4, 2 heads, d_ff 6, 2 layers, context 6,
/// 3 classes, no dropout; the layers' gradient checks and nn::component_problems() build on it.
ClassifierOptions micro_classifier();
/// The options of each encoder layer of a classifier with these options (the shared sizes, the layer's
/// components and the settings).
EncoderLayerOptions layer_options(const ClassifierOptions& options);
/// Sets every training-only setting (SettingSpec::changes_model false: moe's aux_weight) of the variants
/// `model` chose to its value in `given`, or to its default when `given` has none: fine-tuning a checkpoint
/// (`train --init`) keeps the checkpoint's model but takes the run's own training-only settings.
void take_training_settings(ClassifierOptions& model, const ComponentSettings& given);
/// The variant options chose for the kind named ("ffn" -> options.ffn); a ValueError for no such kind.
const std::string& chosen_variant(const ClassifierOptions& options, const std::string& kind);
/// Whether the data must put a <cls> token first for this model's pooling (the pool component says).
bool prepends_cls(const ClassifierOptions& options);

/// The largest vocab_size, d_model, d_ff, context_length and num_classes validate() accepts (2^24): far
/// beyond any model tapegrad trains, and small enough that the product of two of them (a weight's numel)
/// cannot overflow int64. n_layers is capped at kMaxClassifierLayers.
inline constexpr int64_t kMaxClassifierSize = int64_t{1} << 24;
inline constexpr int64_t kMaxClassifierLayers = int64_t{1} << 16;

/// Checks every field's range and throws a ValueError "<context>: <field> = <value> <what is wrong>" for
/// the first bad one: vocab_size, d_model, d_ff, context_length in [1, 2^24]; num_classes in [2, 2^24] (one
/// class has nothing to learn: its probability is always 1); n_heads >= 1 dividing d_model; n_layers in
/// [0, 2^16]; dropout in [0, 1); pad_id in [-1, vocab_size); every component name registered
/// ("<context>: norm = 'rmsnorm' is not registered (registered: layernorm)"); the settings by their
/// declarations (nn::validate_settings: only the chosen variants', each in its range: "norm.eps must be a finite
/// number > 0, got 0"); and the total parameter count within int64. The SequenceClassifier constructor
/// calls it; so do the config readers, with the file as context.
/// Then every chosen variant's refusals (components.h: "attention = linear with positional = rope: ..."), so a
/// combination that cannot work is refused here, before anything is built.
void validate(const ClassifierOptions& options, const std::string& context = "SequenceClassifier");
/// The same with the fields named by `names` (the command line: "d_model" -> "--d-model", and "--d-model 3" in
/// the message; "norm.eps" -> "--norm-eps"); context may be empty.
void validate(const ClassifierOptions& options, const std::string& context, const FieldNames& names);

/// The number of parameter elements SequenceClassifier(options) has, computed from the options alone
/// (nothing is allocated; each component's parameter_count), so a reader can compare it with a weights
/// file's size before building the model. Invalid options are validate()'s ValueError.
///   V·C + positional + n_layers·(attention + ffn + 2 norm) + [final_norm] norm + pool + K·C + K
///   (built-in: learned L·C, softmax 4C² + 4C, dense 2CF + F + C, layernorm 2C)
int64_t parameter_count(const ClassifierOptions& options);

class SequenceClassifier : public Module {
 public:
  /// Parameters from init (each submodule with PyTorch's default initialisation); dropout masks from
  /// dropout_rng, which may be null only when options.dropout == 0. Children: embed, pos_embed, dropout,
  /// encoder, pool, head.
  SequenceClassifier(const ClassifierOptions& options, Generator& init, std::shared_ptr<Generator> dropout_rng);

  /// Class logits. key_padding_mask (true = pad) hides the pad positions as keys and from the mean; it may
  /// be undefined (no padding). When attention_weights is given, each encoder layer appends its (B, H, T, T)
  /// weights. T > context_length is a ShapeError naming both.
  /// A padded batch of long sequences (length_groups) runs as groups of rows of like lengths, each cut
  /// after its longest row's last token: a row's trailing pads change none of its logits (they are hidden
  /// as keys and from the pooling), so this is the same function with less work. Only dropout draws
  /// differ (each group draws its own masks).
  ///   ids: int64 (B, T), key_padding_mask: bool (B, T) -> logits (B, num_classes)
  Tensor forward(const Tensor& ids, const Tensor& key_padding_mask = {},
                 std::vector<Tensor>* attention_weights = nullptr) const;

  /// The encoder's output before pooling, with the same arguments as forward.   ids: (B, T) -> (B, T, C)
  Tensor encode(const Tensor& ids, const Tensor& key_padding_mask = {},
                std::vector<Tensor>* attention_weights = nullptr) const;
  /// The pooled vector of each sequence from encoded positions.   x: (B, T, C), mask: (B, T) -> (B, C)
  Tensor pool(const Tensor& x, const Tensor& key_padding_mask = {}) const;
  /// The sum of the encoder layers' auxiliary losses from the last forward (FeedForwardBlock::
  /// auxiliary_loss, already weighted: moe's load balancing), for the trainer to add to the task loss;
  /// undefined when no layer has one.   -> () scalar
  Tensor auxiliary_loss() const;

  const ClassifierOptions& options() const { return options_; }
  std::shared_ptr<Generator> dropout_rng() const { return dropout_rng_; }
  const Embedding& embed() const { return *embed_; }
  const PositionalEncoding& pos_embed() const { return *pos_embed_; }
  const TransformerEncoder& encoder() const { return *encoder_; }
  TransformerEncoder& encoder() { return *encoder_; }
  const Pooling& pooling() const { return *pooling_; }
  const Linear& head() const { return *head_; }

 private:
  ClassifierOptions options_;
  std::shared_ptr<Generator> dropout_rng_;
  // Owned by the children list.
  Embedding* embed_;
  PositionalEncoding* pos_embed_;
  Dropout* dropout_;
  TransformerEncoder* encoder_;
  Pooling* pooling_;
  Linear* head_;
};

}  // namespace tapegrad::nn
