#pragma once
// Named components. The parts of a model that come in variants are chosen by name from one registry:
//   positional   what is added to the token embeddings          learned, sinusoidal
//   attention    the self-attention of an encoder layer          softmax, linear
//   norm         the normalisation of an encoder layer (norm1, norm2) and the final one   layernorm
//   ffn          the position-wise block of an encoder layer      dense
//   pool         how the sequence becomes one vector              mean, cls
//   activation   inside the dense feed-forward block              relu, gelu
// A variant registers itself in the file that defines it, and a built-in one exactly as a user's does:
//   static const bool registered = register_component<NormKind>({.name = "rmsnorm", .help = "...", ...});
// The model options (nn::ClassifierOptions, nn::EncoderLayerOptions) hold the names; config.json records
// them; the command line offers every registered name as a choice; a name no loaded code registered is a
// ValueError naming it and the registered ones. Adding a variant edits no file of the library.
// Letters: B batch, T positions, C = d_model, H heads.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/module.h"

namespace tapegrad::nn {

struct ClassifierOptions;    // nn/classifier.h
struct EncoderLayerOptions;  // nn/encoder.h

// ---- the interfaces a variant implements ----

/// Position information added to the token embeddings (registered as the classifier's "pos_embed").
class PositionalEncoding : public Module {
 public:
  /// The vectors of positions 0..seq_len-1, added to (B, T, C) token embeddings. dtype is the model's,
  /// for encodings without parameters.   -> (T, C)
  virtual Tensor forward(int64_t seq_len, DType dtype) const = 0;
};

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
  ///   x: (B, T, C) -> output (B, T, C)
  virtual AttentionResult attend(const Tensor& x, const Tensor& attn_mask, const Tensor& key_padding_mask,
                                 bool need_weights) const = 0;
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
};

/// How the encoder's output becomes one vector per sequence (registered as "pool").
class Pooling : public Module {
 public:
  /// key_padding_mask: bool (B, T), true = pad; may be undefined (no padding).   x: (B, T, C) -> (B, C)
  virtual Tensor forward(const Tensor& x, const Tensor& key_padding_mask) const = 0;
};

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
  };
};

struct NormKind {
  static constexpr const char* kName = "norm";
  struct Entry {
    std::string name = {}, help = {};
    std::function<std::unique_ptr<Norm>(int64_t dim, double eps, Generator& init)> make = {};
    std::function<int64_t(int64_t dim)> parameter_count = {};
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
  };
};

struct PoolKind {
  static constexpr const char* kName = "pool";
  struct Entry {
    std::string name = {}, help = {};
    std::function<std::unique_ptr<Pooling>(const ClassifierOptions&, Generator& init)> make = {};
    std::function<int64_t(const ClassifierOptions&)> parameter_count = {};
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
  };
};

// ---- the registry ----

/// Adds a variant of Kind. A missing name, make or parameter_count (apply for an activation), or a name
/// registered before, is a ValueError. Returns true, so that a file registers at load time:
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

}  // namespace tapegrad::nn
