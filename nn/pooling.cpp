#include "nn/pooling.h"

#include <algorithm>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/indexing.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/views.h"
#include "nn/classifier.h"

namespace tapegrad::nn {

namespace {
void check_sequences(const Tensor& x, const char* who) {
  if (x.dim() != 3 || x.size(1) == 0) throw ShapeError(cat(who, ": takes (B, T, C) with T >= 1, got ", x.shape()));
}
}  // namespace

// pooled_b = sum_t [not pad_bt] x_bt / max(1, #non-pad in row b)    (an all-pad row pools to zeros)
Tensor MeanPooling::forward(const Tensor& x, const Tensor& key_padding_mask) const {
  const ScopeName scope = enter_scope();
  check_sequences(x, "MeanPooling");
  if (!key_padding_mask.defined()) return mean(x, 1);
  const int64_t B = x.size(0), T = x.size(1);
  if (key_padding_mask.dtype() != DType::boolean || key_padding_mask.dim() != 2 || key_padding_mask.size(0) != B ||
      key_padding_mask.size(1) != T)
    throw ShapeError(
        cat("MeanPooling: key_padding_mask ", key_padding_mask.shape(), " must be bool (B, T) for x ", x.shape()));
  // Pad positions are replaced by exact zeros, so their values cannot reach the sum.
  const Tensor summed = sum(masked_fill(x, unsqueeze(key_padding_mask, 2), 0.0), 1);  // (B, C)
  const Tensor pads = key_padding_mask.contiguous();
  const bool* pad = pads.data<bool>();
  Tensor counts = empty({B, 1}, x.dtype());  // kept positions per row, at least 1
  dispatch_float(x.dtype(), "MeanPooling", [&](auto tag) {
    using T_ = decltype(tag);
    for (int64_t b = 0; b < B; ++b) {
      int64_t kept = 0;
      for (int64_t t = 0; t < T; ++t) kept += !pad[b * T + t];
      counts.data<T_>()[b] = static_cast<T_>(std::max<int64_t>(kept, 1));
    }
  });
  return summed / counts;
}

// pooled_b = x_b0
Tensor ClsPooling::forward(const Tensor& x, const Tensor&) const {
  const ScopeName scope = enter_scope();
  check_sequences(x, "ClsPooling");
  return select(x, 1, 0);
}

namespace {

/// Settings under which the <cls> vector, put first, can never depend on the text, so the classifier would
/// predict the same for every input (measured: 50.55% on the order task with --causal): refused by name.
std::optional<Refusal> refuses_cls_pooling(const ClassifierOptions& o) {
  if (const VariantSettings attention = chosen_settings<AttentionKind>(o);
      attention.declares("causal") && attention.flag("causal"))
    return Refusal{{{"pool", "cls"}, {"attention.causal", ""}},
                   "under the causal mask the <cls> token, put first, attends only to itself, so the pooled vector "
                   "is the same for every text: pool by the mean instead, or drop the causal mask"};
  if (o.n_layers == 0)
    return Refusal{{{"pool", "cls"}, {"n_layers", "0"}},
                   "with no encoder layer the <cls> vector never sees the text: pool by the mean, or add layers"};
  if (o.context_length < 2)
    return Refusal{{{"pool", "cls"}, {"context_length", cat(o.context_length)}},
                   "leaves no position for the text after the <cls> token: give a context length of at least 2"};
  return std::nullopt;
}

// One initialiser runs every registration of this file when the library loads.
const bool registered = [] {
  register_component<PoolKind>({.name = "mean",
                                .help = "the mean over the non-pad tokens",
                                .make = [](const ClassifierOptions&, Generator&) -> std::unique_ptr<Pooling> {
                                  return std::make_unique<MeanPooling>();
                                },
                                .parameter_count = [](const ClassifierOptions&) { return int64_t{0}; }});
  register_component<PoolKind>({.name = "cls",
                                .help = "the vector of a <cls> token put first",
                                .make = [](const ClassifierOptions&, Generator&) -> std::unique_ptr<Pooling> {
                                  return std::make_unique<ClsPooling>();
                                },
                                .parameter_count = [](const ClassifierOptions&) { return int64_t{0}; },
                                .refuses = refuses_cls_pooling,
                                .prepends_cls = true});
  return true;
}();

}  // namespace

}  // namespace tapegrad::nn
