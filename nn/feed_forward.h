#pragma once
// The position-wise feed-forward block of a transformer layer, laid out as PyTorch's
// nn.TransformerEncoderLayer keeps it: linear1 (C -> F), activation, dropout, linear2 (F -> C), so its
// parameters are "linear1.weight" [F, C], "linear1.bias" [F], "linear2.weight" [C, F], "linear2.bias" [C].
// (The encoder layer's dropout after linear2 and its residual belong to the encoder layer, as in PyTorch.)
// Registered as the ffn component "dense"; the encoder layer registers it inline, so its parameters keep
// those names there ("encoder.layers.0.linear1.weight").
#include <cstdint>
#include <memory>
#include <string>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/components.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace tapegrad::nn {

struct FeedForwardOptions {
  int64_t d_model;                  // C
  int64_t d_ff;                     // F
  std::string activation = "relu";  // a registered activation (nn/components.h)
  double dropout = 0.0;             // after the activation; in [0, 1)
};

class FeedForward : public FeedForwardBlock {
 public:
  /// linear1 then linear2 are initialised from gen (PyTorch's Linear defaults); dropout_rng is the model's
  /// shared dropout stream (may be null when options.dropout == 0).
  FeedForward(const FeedForwardOptions& options, Generator& gen, std::shared_ptr<Generator> dropout_rng);

  /// linear2(dropout(activation(linear1(x)))).   x: (..., C) -> (..., F) -> (..., C)
  Tensor forward(const Tensor& x) const override;

  const FeedForwardOptions& options() const { return options_; }
  Linear& linear1() const { return *linear1_; }
  Dropout& dropout() const { return *dropout_; }
  Linear& linear2() const { return *linear2_; }

 private:
  FeedForwardOptions options_;
  const ActivationKind::Entry* activation_;  // resolved once: the forward does no name lookup
  // Owned by Module::children(); the pointers stay valid when the module moves (the children live on the heap).
  Linear* linear1_;
  Dropout* dropout_;
  Linear* linear2_;
};

}  // namespace tapegrad::nn
