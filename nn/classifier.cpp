#include "nn/classifier.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "autograd/dtype.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/indexing.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/views.h"
#include "nn/module_gradcheck.h"

namespace tapegrad::nn {

EncoderLayerOptions layer_options(const ClassifierOptions& o) {
  return {.d_model = o.d_model, .n_heads = o.n_heads, .d_ff = o.d_ff, .dropout = o.dropout,
          .activation = o.activation, .norm_first = o.norm_first, .attention = o.attention, .norm = o.norm,
          .ffn = o.ffn, .settings = o.settings};
}
ClassifierOptions micro_classifier() {
  ClassifierOptions o;
  o.vocab_size = 7;
  o.d_model = 4;
  o.n_heads = 2;
  o.d_ff = 6;
  o.n_layers = 2;
  o.context_length = 6;
  o.num_classes = 3;
  o.dropout = 0;
  return o;
}

void take_training_settings(ClassifierOptions& model, const ComponentSettings& given) {
  for_each_kind([&]<class Kind>(std::type_identity<Kind>) {
    for (const auto& [spec, value] : chosen_settings<Kind>(model).all()) {
      if (spec->changes_model) continue;
      if (const SettingValue* v = given.find(Kind::kName, spec->name))
        model.settings.set(Kind::kName, spec->name, *v);
      else
        model.settings.erase(Kind::kName, spec->name);
    }
  });
}

const std::string& chosen_variant(const ClassifierOptions& o, const std::string& kind) {
  const std::pair<const char*, const std::string*> kinds[] = {
      {PositionalKind::kName, &o.positional}, {AttentionKind::kName, &o.attention}, {NormKind::kName, &o.norm},
      {FeedForwardKind::kName, &o.ffn},       {PoolKind::kName, &o.pool},           {ActivationKind::kName, &o.activation}};
  for (const auto& [name, chosen] : kinds)
    if (kind == name) return *chosen;
  throw ValueError(cat("chosen_variant: no component kind '", kind, "'"));
}

bool prepends_cls(const ClassifierOptions& options) { return component<PoolKind>(options.pool).prepends_cls; }

namespace {

/// The parameter count in 128 bits: with every size validated (<= 2^24, n_layers <= 2^16) and each
/// component's own count an int64, no term overflows here, and the caller compares the total with INT64_MAX.
unsigned __int128 parameter_count_128(const ClassifierOptions& o) {
  using U = unsigned __int128;
  const auto count = [](int64_t n) { return static_cast<U>(std::max<int64_t>(n, 0)); };
  const EncoderLayerOptions layer_opts = layer_options(o);
  const U C = count(o.d_model), V = count(o.vocab_size), K = count(o.num_classes);
  const U norm = count(component<NormKind>(o.norm).parameter_count(o.d_model, chosen_settings<NormKind>(o)));
  const U layer = count(component<AttentionKind>(o.attention).parameter_count(layer_opts)) +
                  count(component<FeedForwardKind>(o.ffn).parameter_count(layer_opts)) + 2 * norm;
  U total = V * C + count(component<PositionalKind>(o.positional).parameter_count(o)) +
            static_cast<U>(o.n_layers) * layer + count(component<PoolKind>(o.pool).parameter_count(o)) + K * C + K;
  if (o.final_norm) total += norm;
  return total;
}

/// Throws "<prefix><kind> = '<name>' is not registered (registered: ...)" for a name of no variant.
template <class Kind>
void check_registered(const std::string& name, const std::string& prefix, const FieldNames& names) {
  const std::vector<std::string> registered = component_names<Kind>();
  if (std::find(registered.begin(), registered.end(), name) == registered.end())
    throw ValueError(cat(prefix, describe(names(Kind::kName), in_quotes(name)),
                         " is not registered (registered: ", component_choices<Kind>(), ")"));
}

template <class Kind>
ChosenVariant chosen(const std::string& name) {
  return {Kind::kName, name, &component<Kind>(name).settings};
}

/// Throws "<prefix>attention = linear with positional = rope: why" when the chosen variant of Kind refuses
/// the options.
template <class Kind>
void check_refusal(const std::string& name, const ClassifierOptions& o, const std::string& prefix,
                   const FieldNames& names) {
  const RefusesFn& refuses = component<Kind>(name).refuses;
  if (!refuses) return;
  const std::optional<Refusal> refusal = refuses(o);
  if (!refusal) return;
  std::string settings;
  for (size_t i = 0; i < refusal->settings.size(); ++i)  // "a with b", "a with b and c"
    settings += cat(i == 0 ? "" : i == 1 ? " with " : " and ",
                    describe(names(refusal->settings[i].field), refusal->settings[i].value));
  throw ValueError(cat(prefix, settings, ": ", refusal->why));
}

}  // namespace

void validate(const ClassifierOptions& o, const std::string& context) {
  validate(o, context, [](std::string_view field) { return std::string(field); });
}

void validate(const ClassifierOptions& o, const std::string& context, const FieldNames& names) {
  const std::string prefix = context.empty() ? "" : context + ": ";
  const auto fail = [&](const char* field, auto value, const std::string& what) {
    return ValueError(cat(prefix, describe(names(field), cat(value)), " ", what));
  };
  const std::pair<const char*, int64_t> sizes[] = {
      {"vocab_size", o.vocab_size}, {"d_model", o.d_model}, {"d_ff", o.d_ff}, {"context_length", o.context_length}};
  for (const auto& [field, value] : sizes)
    if (value < 1 || value > kMaxClassifierSize)
      throw fail(field, value, cat("is outside [1, ", kMaxClassifierSize, "]"));
  if (o.num_classes < 2 || o.num_classes > kMaxClassifierSize)
    throw fail("num_classes", o.num_classes,
               cat("is outside [2, ", kMaxClassifierSize, "] (one class has nothing to learn)"));
  if (o.n_heads < 1) throw fail("n_heads", o.n_heads, "must be >= 1");
  if (o.d_model % o.n_heads != 0)
    throw fail("n_heads", o.n_heads, cat("does not divide ", describe(names("d_model"), cat(o.d_model))));
  if (o.n_layers < 0 || o.n_layers > kMaxClassifierLayers)
    throw fail("n_layers", o.n_layers, cat("is outside [0, ", kMaxClassifierLayers, "]"));
  if (!(o.dropout >= 0 && o.dropout < 1)) throw fail("dropout", o.dropout, "is outside [0, 1)");
  if (!float32_holds(o.dropout)) throw fail("dropout", o.dropout, float32_refusal(o.dropout));
  if (o.pad_id < -1 || o.pad_id >= o.vocab_size)
    throw fail("pad_id", o.pad_id, cat("is outside the vocabulary [0, ", o.vocab_size, ") (use -1 for none)"));
  check_registered<PositionalKind>(o.positional, prefix, names);
  check_registered<AttentionKind>(o.attention, prefix, names);
  check_registered<NormKind>(o.norm, prefix, names);
  check_registered<FeedForwardKind>(o.ffn, prefix, names);
  check_registered<PoolKind>(o.pool, prefix, names);
  check_registered<ActivationKind>(o.activation, prefix, names);
  validate_settings(o.settings,
                    {chosen<PositionalKind>(o.positional), chosen<AttentionKind>(o.attention), chosen<NormKind>(o.norm),
                     chosen<FeedForwardKind>(o.ffn), chosen<PoolKind>(o.pool), chosen<ActivationKind>(o.activation)},
                    prefix, names);
  check_refusal<PositionalKind>(o.positional, o, prefix, names);
  check_refusal<AttentionKind>(o.attention, o, prefix, names);
  check_refusal<NormKind>(o.norm, o, prefix, names);
  check_refusal<FeedForwardKind>(o.ffn, o, prefix, names);
  check_refusal<PoolKind>(o.pool, o, prefix, names);
  check_refusal<ActivationKind>(o.activation, o, prefix, names);
  const unsigned __int128 count = parameter_count_128(o);
  if (count > static_cast<unsigned __int128>(INT64_MAX))
    throw ValueError(cat(prefix, "the options make more than 2^63 - 1 parameters"));
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
  // Registration order = state order: embed, pos_embed, encoder.layers.*, encoder.norm, pool, head.
  embed_ = &register_module("embed", std::make_unique<Embedding>(options.vocab_size, C, init, options.pad_id));
  pos_embed_ = &register_module("pos_embed", component<PositionalKind>(options.positional).make(options, init));
  // Dropout on the embedding sum, as GPT-2 / BERT / nanoGPT do before the first block (no parameters, so
  // the state is unaffected).
  dropout_ = &register_module("dropout", std::make_unique<Dropout>(options.dropout, dropout_rng_));
  encoder_ = &register_module("encoder", std::make_unique<TransformerEncoder>(options.n_layers, layer_options(options),
                                                                              options.final_norm, init, dropout_rng_));
  pooling_ = &register_module("pool", component<PoolKind>(options.pool).make(options, init));
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
  const Tensor tokens = embed_->forward(ids);                               // (B, T, C)
  const Tensor positions = pos_embed_->forward(T, embed_->weight.dtype());  // (T, C), or undefined: none added
  const Tensor x = dropout_->forward(positions.defined() ? tokens + positions : tokens);
  // The encoding also goes to every attention layer, for encodings that act there (RoPE, ALiBi).
  return encoder_->forward(x, {}, key_padding_mask, attention_weights, pos_embed_);
}

Tensor SequenceClassifier::pool(const Tensor& x, const Tensor& key_padding_mask) const {
  const ScopeName scope = enter_scope();
  return pooling_->forward(x, key_padding_mask);
}

Tensor SequenceClassifier::auxiliary_loss() const { return encoder_->auxiliary_loss(); }

void length_groups(const Tensor& key_padding_mask, LengthGroups& groups) {
  groups.clear();
  const Tensor pads = key_padding_mask.contiguous();
  const int64_t B = pads.size(0), T = pads.size(1);
  if (T < kLengthGroupsFromPositions) return;
  const bool* pad = pads.data<bool>();
  std::vector<int64_t>& length = groups.row_lengths;
  for (int64_t b = 0; b < B; ++b) {
    int64_t n = T;
    while (n > 1 && pad[b * T + n - 1]) --n;
    length.push_back(n);
    groups.rows.push_back(b);
  }
  // Longest first, ties in batch order (std::sort with the tie broken, as stable_sort would allocate)
  std::sort(groups.rows.begin(), groups.rows.end(),
            [&](int64_t a, int64_t b) { return length[a] != length[b] ? length[a] > length[b] : a < b; });
  int64_t positions = 0;
  for (int64_t i = 0; i < B; ++i) {
    const int64_t n = length[groups.rows[i]];
    if (groups.lengths.empty() || n < kLengthGroupShare * groups.lengths.back()) {
      groups.starts.push_back(i);
      groups.lengths.push_back(n);
    }
    positions += groups.lengths.back();
  }
  groups.starts.push_back(B);
  if ((B * T - positions) * kLengthGroupsSaveFrom < B * T) {  // too little saved: the batch runs whole
    groups.clear();
    return;
  }
  for (size_t g = 0; g < groups.size(); ++g)
    std::sort(groups.rows.begin() + groups.starts[g], groups.rows.begin() + groups.starts[g + 1]);
}

namespace {

/// Rows rows[0 .. count) of x (B, T) cut to their first `length` positions, into a new tensor.   -> (count, length)
template <class T>
Tensor rows_cut(const Tensor& x, const int64_t* rows, int64_t count, int64_t length) {
  const Tensor whole = x.contiguous();
  Tensor out = empty({count, length}, x.dtype());
  const T* from = whole.data<T>();
  T* to = out.data<T>();
  for (int64_t i = 0; i < count; ++i) std::copy(from + rows[i] * x.size(1), from + rows[i] * x.size(1) + length, to + i * length);
  return out;
}

}  // namespace

Tensor SequenceClassifier::forward(const Tensor& ids, const Tensor& key_padding_mask,
                                   std::vector<Tensor>* attention_weights) const {
  const ScopeName scope = enter_scope();
  // Weights are (B, H, T, T) for the whole batch, and an auxiliary loss is the last forward's: both run
  // whole, and so does input that encode refuses, with its message.
  bool grouped = key_padding_mask.defined() && attention_weights == nullptr && ids.dim() == 2 &&
                 ids.dtype() == DType::int64 && ids.size(1) <= options_.context_length &&
                 key_padding_mask.shape() == ids.shape() && key_padding_mask.dtype() == DType::boolean;
  for (size_t i = 0; grouped && i < encoder_->n_layers(); ++i) grouped = !encoder_->layer(i).feed_forward().has_auxiliary_loss();
  thread_local LengthGroups this_threads_groups;  // reused: a step allocates nothing for it
  LengthGroups& groups = this_threads_groups;
  if (grouped) length_groups(key_padding_mask, groups);
  if (!grouped || groups.size() == 0)
    return head_->forward(pool(encode(ids, key_padding_mask, attention_weights), key_padding_mask));
  thread_local std::vector<Tensor> this_threads_logits;
  std::vector<Tensor>& logits = this_threads_logits;
  struct Release {  // the groups' logits are not kept past this call, whether it returns or throws
    std::vector<Tensor>& logits;
    ~Release() { logits.clear(); }
  } release{logits};
  for (size_t g = 0; g < groups.size(); ++g) {
    const int64_t* rows = groups.rows.data() + groups.starts[g];
    const int64_t count = groups.starts[g + 1] - groups.starts[g];
    const Tensor group_ids = rows_cut<int64_t>(ids, rows, count, groups.lengths[g]);
    const Tensor group_pads = rows_cut<bool>(key_padding_mask, rows, count, groups.lengths[g]);
    logits.push_back(head_->forward(pool(encode(group_ids, group_pads), group_pads)));
  }
  const Tensor all = concat(logits, 0);
  // Row b's logits are row i of the groups' concatenation where groups.rows[i] = b: back in the batch's
  // order by a gather of rows, whose gradient scatters back (embedding's rule).
  const int64_t B = ids.size(0);
  bool in_order = true;
  for (int64_t i = 0; i < B; ++i) in_order = in_order && groups.rows[i] == i;
  if (in_order) return all;
  Tensor row_of = empty({B}, DType::int64);
  for (int64_t i = 0; i < B; ++i) row_of.data<int64_t>()[groups.rows[i]] = i;
  return embedding(all, row_of);
}

namespace {

// The whole classifier at a micro size, checked over every named parameter (ids are not differentiable),
// built from a fixed seed, converted to the check's dtype (float64 by default), dropout 0. Row 1 ends in
// two pads (id 0): the pad embedding row gets no gradient, and since pad positions are hidden as keys and
// left out of the mean, central differences find none either.
GradcheckCase classifier_case(std::string name, ClassifierOptions options, std::vector<int64_t> token_ids,
                              std::vector<int> pads) {
  const Tensor id_tensor = ids(token_ids, {2, static_cast<int64_t>(token_ids.size() / 2)});
  const Tensor padding = mask(pads, id_tensor.shape());
  return module_case<SequenceClassifier>(
      std::move(name),
      [options](Generator& init) { return std::make_unique<SequenceClassifier>(options, init, nullptr); }, {},
      [id_tensor, padding](const SequenceClassifier& model, const std::vector<Tensor>&) {
        return model.forward(id_tensor, padding);
      },
      401);
}

ClassifierOptions micro(std::string pool, std::string positional, bool norm_first, std::string activation) {
  ClassifierOptions o = micro_classifier();
  o.activation = activation;
  o.norm_first = norm_first;
  o.final_norm = norm_first;
  o.pool = pool;
  o.positional = positional;
  return o;
}

const bool registered = register_gradchecks({
    classifier_case("nn/classifier/mean-pool-padding", micro("mean", "learned", false, "relu"),
                    {3, 1, 4, 1, 5, 2, 6, 5, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0, 1, 1}),
    // <cls> = id 1 first; pre-LN with a final norm, GELU, sinusoidal positions (no pos_embed parameter).
    classifier_case("nn/classifier/cls-pool", micro("cls", "sinusoidal", true, "gelu"), {1, 3, 4, 5, 6, 1, 2, 6, 0, 0},
                    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1}),
});

}  // namespace

}  // namespace tapegrad::nn
