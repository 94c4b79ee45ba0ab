#pragma once
// Named components. The parts of a model that come in variants are chosen by name from one registry:
//   positional   what is added to the token embeddings, or done inside attention   learned, sinusoidal, rope, alibi
//   attention    the self-attention of an encoder layer          softmax, linear
//   norm         the normalisation of an encoder layer (norm1, norm2) and the final one   layernorm
//   ffn          the position-wise block of an encoder layer      dense, moe
//   pool         how the sequence becomes one vector              mean, cls
//   activation   inside the dense feed-forward block              relu, gelu
// A variant registers itself in the file that defines it, and a built-in one exactly as a user's does:
//   static const bool registered = register_component<NormKind>({.name = "rmsnorm", .help = "...", ...});
// The model options (nn::ClassifierOptions, nn::EncoderLayerOptions) hold the names; config.json records
// them; the command line offers every registered name as a choice; a name no loaded code registered is a
// ValueError naming it and the registered ones. A variant with settings of its own declares them in its
// registration (.settings, nn/settings.h); their values travel in the options' ComponentSettings, and the
// flag, the config.json key, the range check and the help come from the declaration. Adding a variant, with
// or without settings, edits no file of the library.
// Letters: B batch, T positions, C = d_model, H heads.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/module.h"
#include "nn/settings.h"

namespace tapegrad::nn {

struct ClassifierOptions;    // nn/classifier.h
struct EncoderLayerOptions;  // nn/encoder.h

// ---- the interfaces a variant implements ----

/// Position information (registered as the classifier's "pos_embed"): vectors added to the token
/// embeddings, or an action inside every attention layer (RoPE rotates q and k, ALiBi biases the scores),
/// or both. The two attention hooks default to doing nothing; the model hands its encoding to each
/// attention layer (SelfAttention::attend).
class PositionalEncoding : public Module {
 public:
  /// The vectors of positions 0..seq_len-1, added to (B, T, C) token embeddings; an undefined Tensor
  /// means nothing is added (an encoding that acts inside attention only). dtype is the model's, for
  /// encodings without parameters.   -> (T, C) or undefined
  virtual Tensor forward(int64_t seq_len, DType dtype) const = 0;

  /// Whether rotate_query_key or attention_bias does anything. Attention runs its fused kernel, which has
  /// no hooks, only when this is false; an encoding overriding either hook must return true.
  virtual bool acts_in_attention() const { return false; }
  /// q and k after the head split, position-encoded; query i is at position i, key j at position j.
  /// Default: unchanged.   q: (B, H, T_q, D), k: (B, H, T_k, D) -> the same shapes
  virtual std::pair<Tensor, Tensor> rotate_query_key(const Tensor& q, const Tensor& k) const { return {q, k}; }
  /// A float bias added to the attention scores of every batch (before the softmax, after the 1/√D
  /// scaling); undefined for none (the default).   -> (H, T_q, T_k) or undefined
  virtual Tensor attention_bias(int64_t n_heads, int64_t T_q, int64_t T_k, DType dtype) const {
    (void)n_heads, (void)T_q, (void)T_k, (void)dtype;
    return {};
  }
  /// attention_bias in the form flash attention adds block by block without a (T_q, T_k) tensor: one
  /// slope per head when the bias is -slope_h · |i - j| (ALiBi), an empty list when there is none. The
  /// default, std::nullopt, says neither is known, and attention then materialises attention_bias.
  virtual std::optional<std::vector<double>> attention_bias_slopes(int64_t n_heads, int64_t T_q, int64_t T_k) const {
    (void)n_heads, (void)T_q, (void)T_k;
    return std::nullopt;
  }

  // Generation with a KV cache (nn/kv_cache.h) puts new queries after cached keys, so the hooks are also asked
  // with the positions the queries and keys start at. An encoding that acts in attention and overrides
  // neither of these serves starts of 0 only, and caching refuses it (supports_positions_from).
  /// Whether the two hooks below serve any start: true for an encoding that does not act in attention.
  virtual bool supports_positions_from() const { return !acts_in_attention(); }
  /// rotate_query_key with query i at position q_start + i and key j at position k_start + j. The default:
  /// rotate_query_key for starts of 0, q and k unchanged for an encoding that does not act in attention, a
  /// ValueError otherwise.   q: (B, H, T_q, D), k: (B, H, T_k, D) -> the same shapes
  virtual std::pair<Tensor, Tensor> rotate_query_key_from(const Tensor& q, const Tensor& k, int64_t q_start,
                                                          int64_t k_start) const;
  /// attention_bias with the same positions; the default as rotate_query_key_from's.   -> (H, T_q, T_k) or undefined
  virtual Tensor attention_bias_from(int64_t n_heads, int64_t T_q, int64_t T_k, int64_t q_start, int64_t k_start,
                                     DType dtype) const;
};

class KeyValueCache;  // nn/kv_cache.h

struct AttentionResult {
  Tensor output;  // (B, ..., T_q, D_v)
  // (B, ..., T_q, T_k): the attention probabilities as they multiply v, i.e. after dropout in training, as
  // PyTorch's nn.MultiheadAttention returns them. In eval mode (inspection) rows sum to 1, or are all zero
  // for a query whose keys are all hidden. Undefined when not asked for.
  Tensor weights;
};

/// Self-attention inside an encoder layer (registered as "self_attn").
class SelfAttention : public Module {
 public:
  /// x attending to itself. attn_mask: (T, T), bool true = hidden, or float, added; key_padding_mask:
  /// (B, T), bool true = pad. With need_weights, weights are the per-head probabilities (B, H, T, T).
  /// positions: the model's positional encoding, whose attention hooks (rotate_query_key,
  /// attention_bias) the attention applies; null for none.
  ///   x: (B, T, C) -> output (B, T, C)
  virtual AttentionResult attend(const Tensor& x, const Tensor& attn_mask, const Tensor& key_padding_mask,
                                 bool need_weights, const PositionalEncoding* positions = nullptr) const = 0;

  /// Whether attend_cached is served (generation with a KV cache); the default is not.
  virtual bool supports_kv_cache() const { return false; }
  /// Causal self-attention of new positions after the cached ones, without the tape: x holds positions
  /// [cache.length(), cache.length() + T) of every sequence; their keys and values are appended to the cache,
  /// and new position p attends to every position <= p. Equal to attend() with the causal mask over the whole
  /// sequence, at those positions. The default is a ValueError naming the attention.
  ///   x: (B, T, C) -> (B, T, C)
  virtual Tensor attend_cached(const Tensor& x, KeyValueCache& cache, const PositionalEncoding* positions) const;
};

/// A normalisation over the last dim (registered as "norm1", "norm2" and the encoder's "norm").
class Norm : public Module {
 public:
  /// x normalised per row.   x: (..., C) -> (..., C)
  virtual Tensor forward(const Tensor& x) const = 0;
};

/// The position-wise block of an encoder layer. It is registered inline: its parameters are named as the
/// layer's own ("linear1.weight"), which is where PyTorch's nn.TransformerEncoderLayer keeps them.
class FeedForwardBlock : public Module {
 public:
  /// Each position transformed on its own.   x: (B, T, C) -> (B, T, C)
  virtual Tensor forward(const Tensor& x) const = 0;
  /// forward(x) in a batch whose padding key_padding_mask marks (bool (B, T), true = pad; may be undefined).
  /// The encoder layer calls this one. A block that keeps statistics over the tokens (moe: its routing
  /// fractions) overrides it to leave the pads out of them; the default ignores the mask, which is right for
  /// any block that transforms each position on its own and nothing more.   x: (B, T, C) -> (B, T, C)
  virtual Tensor forward_masked(const Tensor& x, const Tensor& key_padding_mask) const {
    (void)key_padding_mask;
    return forward(x);
  }
  /// The block's auxiliary training loss from its last forward, already weighted, for the trainer to add to
  /// the task loss (moe: the load-balancing loss); an undefined Tensor (the default) for a block with none.
  virtual Tensor auxiliary_loss() const { return {}; }
  /// Whether forward leaves an auxiliary_loss. A layer whose block does cannot be checkpointed
  /// (TransformerEncoder::set_activation_checkpointing): the loss must be recorded when it is made.
  virtual bool has_auxiliary_loss() const { return false; }
};

/// How the encoder's output becomes one vector per sequence (registered as "pool").
class Pooling : public Module {
 public:
  /// key_padding_mask: bool (B, T), true = pad; may be undefined (no padding).   x: (B, T, C) -> (B, C)
  virtual Tensor forward(const Tensor& x, const Tensor& key_padding_mask) const = 0;
};

// ---- combinations a variant cannot serve ----

/// One setting of the model options as a check names it: the ClassifierOptions field, or "<kind>.<name>" for a
/// component's setting ("attention.causal"), and its value ("" for a flag that is on, as --causal).
struct Setting {
  std::string field, value;
};

/// Why a variant cannot serve the other options: the settings involved (the variant's own first) and the reason.
/// validate(ClassifierOptions) turns it into a ValueError naming those settings, by field in the library and by
/// flag on the command line, before anything is built, so that a combination that cannot work is refused
/// before any work and never found at the first forward.
struct Refusal {
  std::vector<Setting> settings;
  std::string why;
};

/// A variant's check of the whole model options: a Refusal, or nothing when it can serve them. Optional.
using RefusesFn = std::function<std::optional<Refusal>(const ClassifierOptions&)>;

// ---- the kinds: what a registration of each holds ----
// parameter_count computes a variant's number of parameter elements from the options alone, so that a
// model too large for the machine, or a config.json that does not match its weights file, is refused
// before anything is allocated. nn::component_problems() checks it against the built module.

struct PositionalKind {
  static constexpr const char* kName = "positional";
  struct Entry {
    std::string name = {}, help = {};
    std::function<std::unique_ptr<PositionalEncoding>(const ClassifierOptions&, Generator& init)> make = {};
    std::function<int64_t(const ClassifierOptions&)> parameter_count = {};
    RefusesFn refuses = {};  // optional: combinations this variant cannot serve
    std::vector<SettingSpec> settings = {};  // optional: its own settings (nn/settings.h)
    // It acts inside attention (rotates q and k, or biases the scores): an attention that forms no (T, T)
    // scores (linear) cannot serve it, and says so before anything is built.
    bool acts_in_attention = false;
  };
};

struct AttentionKind {
  static constexpr const char* kName = "attention";
  struct Entry {
    std::string name = {}, help = {};
    std::function<std::unique_ptr<SelfAttention>(const EncoderLayerOptions&, Generator& init,
                                                 std::shared_ptr<Generator> dropout_rng)>
        make;
    std::function<int64_t(const EncoderLayerOptions&)> parameter_count = {};
    RefusesFn refuses = {};  // optional: combinations this variant cannot serve
    std::vector<SettingSpec> settings = {};  // optional: its own settings (read with settings_of)
  };
};

struct NormKind {
  static constexpr const char* kName = "norm";
  struct Entry {
    std::string name = {}, help = {};
    // settings: this variant's own (its declared .settings with the values given).
    std::function<std::unique_ptr<Norm>(int64_t dim, const VariantSettings& settings, Generator& init)> make = {};
    std::function<int64_t(int64_t dim, const VariantSettings& settings)> parameter_count = {};
    RefusesFn refuses = {};  // optional: combinations this variant cannot serve
    std::vector<SettingSpec> settings = {};  // optional: its own settings
  };
};

struct FeedForwardKind {
  static constexpr const char* kName = "ffn";
  struct Entry {
    std::string name = {}, help = {};
    std::function<std::unique_ptr<FeedForwardBlock>(const EncoderLayerOptions&, Generator& init,
                                                    std::shared_ptr<Generator> dropout_rng)>
        make;
    std::function<int64_t(const EncoderLayerOptions&)> parameter_count = {};
    RefusesFn refuses = {};  // optional: combinations this variant cannot serve
    // Whether its blocks leave an auxiliary loss (FeedForwardBlock::has_auxiliary_loss): their layers cannot be
    // checkpointed, which a run asking for that is told before any work.
    bool auxiliary_loss = false;
    std::vector<SettingSpec> settings = {};  // optional: its own settings (read with settings_of)
  };
};

struct PoolKind {
  static constexpr const char* kName = "pool";
  struct Entry {
    std::string name = {}, help = {};
    std::function<std::unique_ptr<Pooling>(const ClassifierOptions&, Generator& init)> make = {};
    std::function<int64_t(const ClassifierOptions&)> parameter_count = {};
    RefusesFn refuses = {};  // optional: combinations this variant cannot serve
    std::vector<SettingSpec> settings = {};  // optional: its own settings
    bool prepends_cls = false;  // the data gets a <cls> token first (the pooled position of "cls")
  };
};

struct ActivationKind {
  static constexpr const char* kName = "activation";
  struct Entry {
    std::string name = {}, help = {};
    std::function<Tensor(const Tensor&)> apply = {};  // x: any -> same
    // Optional: activation(x Wᵀ + b) in one fused op (relu: linear_relu), bit-identical to the two.
    std::function<Tensor(const Tensor& x, const Tensor& weight, const Tensor& bias)> linear = {};
    RefusesFn refuses = {};  // optional: combinations this variant cannot serve
    std::vector<SettingSpec> settings = {};  // optional: its own settings
  };
};

// ---- the registry ----

/// Adds a variant of Kind. A missing name, make or parameter_count (apply for an activation), a name
/// registered before, or a bad settings declaration is a ValueError: a setting without a name or declared
/// twice, a default of another type or outside its range, a max_setting that is not an integer setting of
/// the variant, a flag not starting with "--" or taken by another setting, and a setting another variant of
/// the kind declares with another type, flag or changes_model. Returns true, so that a file registers at load time:
///   static const bool registered = register_component<NormKind>({...});
template <class Kind>
bool register_component(typename Kind::Entry entry);

/// The variant of Kind registered under name (the reference stays valid for the program's lifetime);
/// otherwise a ValueError "unknown norm 'rmsnorm' (registered: layernorm)".
template <class Kind>
const typename Kind::Entry& component(const std::string& name);

/// The names registered for Kind, in registration order (the built-in ones first).
template <class Kind>
std::vector<std::string> component_names();

/// "a, b or c", for messages and help texts.
template <class Kind>
std::string component_choices();

/// The chosen variant's settings: its declarations with the values given for its kind in `values` (the
/// variant reads them: settings_of<NormKind>(o.settings, "layernorm").real("eps")). An unregistered
/// variant is component()'s ValueError.
template <class Kind>
VariantSettings settings_of(const ComponentSettings& values, const std::string& variant);

/// f(std::type_identity<Kind>{}) for every kind, in order: positional, attention, norm, ffn, pool, activation.
template <class F>
void for_each_kind(F&& f) {
  f(std::type_identity<PositionalKind>{}), f(std::type_identity<AttentionKind>{}), f(std::type_identity<NormKind>{});
  f(std::type_identity<FeedForwardKind>{}), f(std::type_identity<PoolKind>{}), f(std::type_identity<ActivationKind>{});
}

/// The settings of the variant of Kind that `options` (ClassifierOptions or EncoderLayerOptions) chose.
template <class Kind, class Options>
VariantSettings chosen_settings(const Options& options) {
  if constexpr (std::is_same_v<Kind, PositionalKind>) return settings_of<Kind>(options.settings, options.positional);
  if constexpr (std::is_same_v<Kind, AttentionKind>) return settings_of<Kind>(options.settings, options.attention);
  if constexpr (std::is_same_v<Kind, NormKind>) return settings_of<Kind>(options.settings, options.norm);
  if constexpr (std::is_same_v<Kind, FeedForwardKind>) return settings_of<Kind>(options.settings, options.ffn);
  if constexpr (std::is_same_v<Kind, PoolKind>) return settings_of<Kind>(options.settings, options.pool);
  if constexpr (std::is_same_v<Kind, ActivationKind>) return settings_of<Kind>(options.settings, options.activation);
}

/// One setting of a kind, with every variant that declares it (one flag serves them all).
struct DeclaredSetting {
  std::string kind;                   // "ffn"
  std::vector<std::string> variants;  // {"moe"}
  SettingSpec spec;                   // the first declaration (the others agree on type, flag and changes_model)
};
/// Every declared setting of every kind, in the kinds' order (positional, attention, norm, ffn, pool,
/// activation) and then registration order: what the command line makes its flags from, and what
/// docs/checkpoints.md's key table lists.
std::vector<DeclaredSetting> declared_settings();
/// One variant's declaration of one setting.
struct VariantSetting {
  std::string kind, variant;
  SettingSpec spec;
};
/// Every variant's every declared setting, in declared_settings()'s order of kinds, then by variant: the rows
/// of docs/checkpoints.md's table of settings.
std::vector<VariantSetting> settings_by_variant();
/// The declared flag of the setting "<kind>.<name>" ("norm.eps" -> "--norm-eps"); empty when none declares it.
std::string setting_flag(std::string_view field);

}  // namespace tapegrad::nn
