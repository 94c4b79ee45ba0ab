#include "nn/language_model.h"

#include <algorithm>
#include <utility>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/views.h"
#include "autograd/tape.h"
#include "nn/attention.h"
#include "nn/module_gradcheck.h"

namespace tapegrad::nn {

ClassifierOptions body_options(const LanguageModelOptions& o) {
  ClassifierOptions body;
  body.vocab_size = o.vocab_size;
  body.d_model = o.d_model;
  body.n_heads = o.n_heads;
  body.d_ff = o.d_ff;
  body.n_layers = o.n_layers;
  body.context_length = o.context_length;
  body.num_classes = 2;  // not read: there is no classifier head
  body.dropout = o.dropout;
  body.norm_first = o.norm_first;
  body.final_norm = true;
  body.pad_id = -1;  // windows of text have no padding
  body.positional = o.positional;
  body.attention = o.attention;
  body.norm = o.norm;
  body.ffn = o.ffn;
  body.pool = "mean";  // not built
  body.activation = o.activation;
  body.settings = o.settings;
  body.settings.set(AttentionKind::kName, "causal", true);
  return body;
}

LanguageModelOptions language_model_options(const ClassifierOptions& body) {
  return {.vocab_size = body.vocab_size, .d_model = body.d_model, .n_heads = body.n_heads, .d_ff = body.d_ff,
          .n_layers = body.n_layers, .context_length = body.context_length, .dropout = body.dropout,
          .norm_first = body.norm_first, .tie_embeddings = false, .positional = body.positional,
          .attention = body.attention, .norm = body.norm, .ffn = body.ffn, .activation = body.activation,
          .settings = body.settings};
}

void validate(const LanguageModelOptions& options, const std::string& context) {
  validate(options, context, [](std::string_view field) { return std::string(field); });
}

void validate(const LanguageModelOptions& options, const std::string& context, const FieldNames& names) {
  // Asked before validate(body) so that the message says why, not that the setting is unknown; a name no
  // variant registered is validate(body)'s to name.
  const std::vector<std::string> registered = component_names<AttentionKind>();
  const bool known = std::find(registered.begin(), registered.end(), options.attention) != registered.end();
  const auto declares_causal = [](const std::vector<SettingSpec>& declared) {
    return std::any_of(declared.begin(), declared.end(), [](const SettingSpec& s) { return s.name == "causal"; });
  };
  if (known && !declares_causal(component<AttentionKind>(options.attention).settings))
    throw ValueError(cat(context.empty() ? "" : context + ": ", describe(names("attention"), in_quotes(options.attention)),
                         " cannot hide later positions (no causal setting): a language model needs it"));
  validate(body_options(options), context, names);
}

int64_t parameter_count(const LanguageModelOptions& options) {
  const ClassifierOptions body = body_options(options);
  validate(options);
  // The classifier's count with its pool and head (K·C + K) swapped for the vocabulary head (V·C), which a
  // tied model does not have apart from its embedding.
  const int64_t pool = component<PoolKind>(body.pool).parameter_count(body);
  const int64_t head = options.tie_embeddings ? 0 : options.vocab_size * options.d_model;
  return parameter_count(body) - pool - (body.num_classes * body.d_model + body.num_classes) + head;
}

LanguageModelOptions micro_language_model() {
  LanguageModelOptions o;
  o.vocab_size = 7;
  o.d_model = 4;
  o.n_heads = 2;
  o.d_ff = 6;
  o.n_layers = 2;
  o.context_length = 6;
  o.dropout = 0;
  return o;
}

LanguageModel::LanguageModel(const LanguageModelOptions& options, Generator& init,
                             std::shared_ptr<Generator> dropout_rng)
    : options_(options), dropout_rng_(std::move(dropout_rng)) {
  validate(options);
  const ClassifierOptions body = body_options(options);
  const int64_t C = options.d_model;
  // Registration order = state order: embed, pos_embed, encoder.layers.*, encoder.norm, head.
  embed_ = &register_module("embed", std::make_unique<Embedding>(options.vocab_size, C, init, body.pad_id));
  pos_embed_ = &register_module("pos_embed", component<PositionalKind>(options.positional).make(body, init));
  dropout_ = &register_module("dropout", std::make_unique<Dropout>(options.dropout, dropout_rng_));
  encoder_ = &register_module("encoder", std::make_unique<TransformerEncoder>(body.n_layers, layer_options(body),
                                                                              body.final_norm, init, dropout_rng_));
  // Tied: one table with the head's values, U(±1/√C), as `embed.weight = head.weight` gives in PyTorch (the
  // direction nanoGPT writes), not the embedding's N(0, 1): as output weights those rows would start each logit
  // at a standard deviation of about √C (the final norm's output has norm √C), and the loss far above ln V (a
  // 30-character model at C = 32: loss 3.0 after 40 AdamW steps, against 0.42 untied).
  if (options.tie_embeddings) {
    const Linear drawn(C, options.vocab_size, false, init);
    NoGradGuard no_grad;
    Tensor(embed_->weight).copy_(drawn.weight);
  }
  head_ = &register_module("head", options.tie_embeddings
                                       ? std::make_unique<Linear>(embed_->weight, false, init)
                                       : std::make_unique<Linear>(C, options.vocab_size, false, init));
}

Tensor LanguageModel::forward(const Tensor& ids, std::vector<Tensor>* attention_weights) const {
  const ScopeName scope = enter_scope();
  if (ids.dtype() != DType::int64)
    throw DTypeError(cat("LanguageModel: ids ", ids.shape(), " must be int64, got ", dtype_name(ids.dtype())));
  if (ids.dim() != 2) throw ShapeError(cat("LanguageModel: ids ", ids.shape(), " must be (B, T)"));
  const int64_t T = ids.size(1);
  if (T > options_.context_length)
    throw ShapeError(cat("LanguageModel: sequence length T = ", T, " exceeds context_length ", options_.context_length));
  const Tensor tokens = embed_->forward(ids);                               // (B, T, C)
  const Tensor positions = pos_embed_->forward(T, embed_->weight.dtype());  // (T, C), or undefined: none added
  const Tensor x = dropout_->forward(positions.defined() ? tokens + positions : tokens);
  // Causal through the attention's own setting (body_options), so that flash attention skips the blocks
  // above the diagonal; the encoding also goes to every attention layer (RoPE, ALiBi).
  return head_->forward(encoder_->forward(x, {}, {}, attention_weights, pos_embed_));
}

bool LanguageModel::supports_kv_cache() const {
  if (!pos_embed_->supports_positions_from()) return false;
  for (size_t i = 0; i < encoder_->n_layers(); ++i)
    if (!encoder_->layer(i).self_attn().supports_kv_cache()) return false;
  return true;
}

std::vector<KeyValueCache> LanguageModel::make_kv_caches() const {
  return std::vector<KeyValueCache>(encoder_->n_layers(), KeyValueCache(options_.context_length));
}

Tensor LanguageModel::forward_cached(const Tensor& ids, std::vector<KeyValueCache>& caches) const {
  const ScopeName scope = enter_scope();
  NoGradGuard inference;
  if (!supports_kv_cache())
    throw ValueError(cat("LanguageModel: attention '", options_.attention, "' with positional '", options_.positional,
                         "' keeps no KV cache"));
  if (ids.dtype() != DType::int64 || ids.dim() != 2)
    throw ShapeError(cat("LanguageModel: ids ", ids.shape(), " ", dtype_name(ids.dtype()), " must be int64 (B, T)"));
  const int64_t start = caches.empty() ? 0 : caches.front().length(), T = ids.size(1);
  if (start + T > options_.context_length)
    throw ShapeError(cat("LanguageModel: positions ", start, " + ", T, " exceed context_length ", options_.context_length));
  const Tensor tokens = embed_->forward(ids);  // (B, T, C)
  // The encoding's vectors of positions [start, start + T): the rows of the first start + T.
  const Tensor all_positions = pos_embed_->forward(start + T, embed_->weight.dtype());
  const Tensor x = all_positions.defined() ? tokens + slice(all_positions, 0, start, start + T) : tokens;
  return head_->forward(encoder_->forward_cached(dropout_->forward(x), caches, pos_embed_));
}

Tensor LanguageModel::auxiliary_loss() const { return encoder_->auxiliary_loss(); }

namespace {

// The whole language model at a micro size over every named parameter, float64, dropout 0. The random
// cotangent over (B, T, V) logits checks every position's row, so a mask that let position t see t + 1
// would still pass here: the causal property has a test of its own (tests/nn/test_language_model.cpp).
GradcheckCase language_model_case(std::string name, LanguageModelOptions options) {
  const Tensor id_tensor = ids({3, 1, 4, 1, 5, 2, 6, 5, 0, 2}, {2, 5});
  return module_case<LanguageModel>(
      std::move(name), [options](Generator& init) { return std::make_unique<LanguageModel>(options, init, nullptr); },
      {}, [id_tensor](const LanguageModel& model, const std::vector<Tensor>&) { return model.forward(id_tensor); },
      409);
}

LanguageModelOptions micro_with(std::string positional, bool norm_first) {
  LanguageModelOptions o = micro_language_model();
  o.positional = std::move(positional);
  o.norm_first = norm_first;
  return o;
}

const bool registered = register_gradchecks({
    language_model_case("nn/language_model/learned-pre-ln", micro_with("learned", true)),
    language_model_case("nn/language_model/rope-post-ln", micro_with("rope", false)),
    // One tensor read twice (the lookup and the head): its gradient must be the sum of both uses, which a
    // finite difference of the shared values measures.
    language_model_case("nn/language_model/tied", [] {
      LanguageModelOptions o = micro_with("learned", true);
      o.tie_embeddings = true;
      return o;
    }()),
});

}  // namespace

}  // namespace tapegrad::nn
