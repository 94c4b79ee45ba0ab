#include "train/train_options.h"

#include <cmath>
#include <filesystem>
#include <limits>

#include "autograd/dtype.h"
#include "autograd/error.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/checkpoint/checkpoint.h"
#include "train/io/strict_json.h"
#include "train/training_memory.h"

namespace tapegrad {

using nlohmann::json;

namespace {

/// Bounds that only a typo exceeds (the memory check in the trainer catches what fits these but not the
/// machine).
constexpr int64_t kMaxWidth = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 1024;
constexpr int kMaxThreads = 1024;
constexpr int64_t kMaxValidSize = 10'000'000;  // a generated validation set that still fits any machine's memory

}  // namespace

std::string option_field_name(std::string_view field) { return cat("TrainOptions.", field); }

namespace {

/// "<field> must be <rule>, got <value>" unless ok; the field named as the caller names it.
template <class Value>
void require(const OptionNames& name, bool ok, std::string_view field, const std::string& rule, const Value& value) {
  if (!ok) throw ValueError(cat(name(field), " must be ", rule, ", got ", value));
}

/// A real field: its rule, then what float32 holds, in which the run computes with it ("--lr 1e-50 is 0 or a
/// denormal in float32": a frozen run nobody asked for).
void require_real(const OptionNames& name, bool ok, std::string_view field, const std::string& rule, double value) {
  require(name, ok, field, rule, value);
  if (!float32_holds(value)) throw ValueError(cat(nn::describe(name(field), cat(value)), " ", float32_refusal(value)));
}

/// The model's own options (the shape, then nn::validate's rules and the components' combinations), by the
/// same names and before any work. Only when the run builds its model: with --init it is the checkpoint's.
void validate_model(const TrainOptions& o, const OptionNames& name) {
  require(name, o.model.d_model > 0 && o.model.d_model <= kMaxWidth, "model.d_model", cat("in [1, ", kMaxWidth, "]"),
          o.model.d_model);
  require(name, o.model.n_heads > 0 && o.model.n_heads <= o.model.d_model, "model.n_heads",
          cat("in [1, ", name("model.d_model"), " = ", o.model.d_model, "]"), o.model.n_heads);
  if (o.model.d_model % o.model.n_heads != 0)
    throw ValueError(cat(name("model.d_model"), " ", o.model.d_model, " is not divisible by ", name("model.n_heads"), " ",
                         o.model.n_heads, ": each head gets d_model / heads dimensions"));
  require(name, o.model.d_ff > 0 && o.model.d_ff <= kMaxWidth, "model.d_ff", cat("in [1, ", kMaxWidth, "]"), o.model.d_ff);
  require(name, o.model.n_layers >= 0 && o.model.n_layers <= kMaxLayers, "model.n_layers", cat("in [0, ", kMaxLayers, "]"),
          o.model.n_layers);
  // The rest of the model's rules, and every combination a component cannot serve (--attention linear with
  // --positional rope, --pool cls with --causal), by the same names and before any work. The data fills in
  // the vocabulary, the classes and (when 0) the context later; stand-ins that pass take their place here.
  nn::ClassifierOptions model = o.model;
  model.vocab_size = 2;
  model.num_classes = 2;
  model.pad_id = 0;
  model.context_length = o.context_length > 0 ? o.context_length : 2;
  nn::validate(model, "", [&name](std::string_view field) {
    return field == "context_length" ? name("context_length") : name(cat("model.", field));
  });
}

/// A language model's options (nn::validate of LanguageModelOptions: the classifier's rules, and an attention that
/// can be causal), by the same names; the vocabulary comes from the tokenizer later.
void validate_language_model(const TrainOptions& o, const OptionNames& name) {
  nn::ClassifierOptions body = o.model;
  body.vocab_size = 2;
  body.context_length = language_model_context(o);
  nn::validate(nn::language_model_options(body), "", [&name](std::string_view field) {
    return field == "context_length" ? name("context_length") : name(cat("model.", field));
  });
}

/// The options of a language model's run: its text, its tokenizer, and no epochs (its windows are drawn at
/// random starts: token_windows.h).
void validate_language_model_run(const TrainOptions& o, const OptionNames& name) {
  if (o.data.empty())
    throw ValueError(cat(name("task.name"), " ", kLanguageModelTask, " trains on a text file: give ", name("data")));
  if (o.epochs > 0)
    throw ValueError(cat(name("epochs"), " does not apply to ", name("task.name"), " ", kLanguageModelTask,
                         ": its training windows start at random places of the text, so there are no epochs; give ",
                         name("steps")));
  if (o.tokenizer != "characters" && o.tokenizer != "words" && o.tokenizer != "bpe")
    throw ValueError(cat(name("tokenizer"), " must be characters, words or bpe, got ", in_quotes(o.tokenizer)));
  require(name, o.vocab_size >= 2 && o.vocab_size <= kMaxWidth, "vocab_size", cat("in [2, ", kMaxWidth, "]"), o.vocab_size);
  if (!o.tokenizer_model.empty() && o.tokenizer != "bpe")
    throw ValueError(cat(name("tokenizer_model"), " is a SentencePiece model: it needs ", name("tokenizer"), " bpe, not ",
                         o.tokenizer));
}

/// The options this run's kind never reads hold their defaults: their flags are refused where they would have
/// no effect (train_command.cpp), so only an edited trainer.json can hold another value, which would be kept
/// and ignored.
void refuse_options_without_effect(const TrainOptions& o, const OptionNames& name, bool language_model) {
  const TrainOptions defaults;
  const auto refuse_edited = [&](bool edited, std::string_view field, const std::string& why) {
    if (edited) throw ValueError(cat(name(field), " ", why, ": it has no effect here"));
  };
  if (language_model) {
    refuse_edited(o.tokenizer != "bpe" && o.vocab_size != defaults.vocab_size, "vocab_size",
                  cat("applies to ", name("tokenizer"), " bpe only, not ", o.tokenizer));
    refuse_edited(o.shuffle != defaults.shuffle, "shuffle",
                  cat("configures a classifier's epochs, not ", name("task.name"), " ", kLanguageModelTask));
    return;
  }
  const std::string lm_only = cat("applies to ", name("task.name"), " ", kLanguageModelTask, " only");
  refuse_edited(o.tokenizer != defaults.tokenizer, "tokenizer", lm_only);
  refuse_edited(o.vocab_size != defaults.vocab_size, "vocab_size", lm_only);
  refuse_edited(!o.tokenizer_model.empty(), "tokenizer_model", lm_only);
  refuse_edited(o.tie_embeddings != defaults.tie_embeddings, "tie_embeddings", lm_only);
}

}  // namespace

void validate_activation_checkpointing(const TrainOptions& o, const OptionNames& name) {
  if (o.activation_checkpointing != "auto" && o.activation_checkpointing != "on" && o.activation_checkpointing != "off")
    throw ValueError(cat(name("activation_checkpointing"), " must be auto, on or off, got ", in_quotes(o.activation_checkpointing)));
  // A layer's auxiliary loss (moe's load balancing) is recorded when its forward runs; a checkpointed layer's
  // forward runs again in backward, too late to add it. auto leaves such layers whole.
  if (o.activation_checkpointing == "on" && o.model.n_layers > 0 &&
      nn::component<nn::FeedForwardKind>(o.model.ffn).auxiliary_loss)
    throw ValueError(cat(name("activation_checkpointing"), " on cannot recompute the layers of ", name("model.ffn"), " ",
                         o.model.ffn, ": their auxiliary loss is recorded as their forward runs (use auto or off)"));
  // Every layer but the last is recomputed (nn/encoder.h): the last one's activations are used at once.
  if (o.activation_checkpointing == "on" && o.model.n_layers <= 1)
    throw ValueError(cat(name("activation_checkpointing"), " on has no effect with ", name("model.n_layers"), " ",
                         o.model.n_layers, ": it recomputes every layer but the last, whose activations backward "
                         "uses at once (it needs 2 layers or more)"));
}

int64_t language_model_context(const TrainOptions& o) {
  return o.context_length > 0 ? o.context_length : kDefaultLanguageModelContext;
}

void validate(const TrainOptions& o, const OptionNames& name) {
  // Comparisons are written so that NaN fails them.
  // The components' settings have their declared ranges, checked by nn::validate below.
  require_real(name, std::isfinite(o.lr) && o.lr >= 0, "lr", "a finite number >= 0", o.lr);  // 0 as in PyTorch: a frozen run
  require_real(name, std::isfinite(o.weight_decay) && o.weight_decay >= 0, "weight_decay", "a finite number >= 0",
               o.weight_decay);
  require_real(name, std::isfinite(o.momentum) && o.momentum >= 0 && o.momentum < 1, "momentum", "in [0, 1)", o.momentum);
  require_real(name, std::isfinite(o.clip_grad) && o.clip_grad >= 0, "clip_grad", "a finite number >= 0 (0: off)",
               o.clip_grad);
  require_real(name, o.target_acc >= 0 && o.target_acc <= 1, "target_acc", "a fraction in [0, 1] (0: never stop early)",
               o.target_acc);
  require_real(name, o.model.dropout >= 0 && o.model.dropout < 1, "model.dropout", "in [0, 1)", o.model.dropout);
  require(name, o.batch_size > 0, "batch_size", "positive", o.batch_size);
  require(name, o.steps >= 0, "steps", "positive", o.steps);
  require(name, o.epochs >= 0, "epochs", "positive", o.epochs);
  require(name, o.steps <= kMaxSteps, "steps", cat("at most ", kMaxSteps), o.steps);
  require(name, o.epochs <= kMaxSteps, "epochs", cat("at most ", kMaxSteps), o.epochs);
  require(name, o.warmup >= 0 && o.warmup <= kMaxSteps, "warmup", cat("in [0, ", kMaxSteps, "]"), o.warmup);
  require(name, o.eval_every > 0, "eval_every", "positive", o.eval_every);
  require(name, o.log_every > 0, "log_every", "positive", o.log_every);
  require(name, o.threads >= 0 && o.threads <= kMaxThreads, "threads", cat("in [0, ", kMaxThreads, "] (0: every core)"), o.threads);
  require(name, o.train_size >= 0, "train_size", ">= 0 (0: fresh examples every batch)", o.train_size);
  require(name, o.valid_size >= 1 && o.valid_size <= kMaxValidSize, "valid_size", cat("in [1, ", kMaxValidSize, "]"),
          o.valid_size);
  require(name, o.context_length >= 0 && o.context_length <= kMaxLength, "context_length",
          cat("in [0, ", kMaxLength, "] (0: from the data)"), o.context_length);
  if (o.steps > 0 && o.epochs > 0) throw ValueError(cat("give ", name("steps"), " or ", name("epochs"), ", not both"));
  const bool language_model = is_language_model(o);
  if (language_model) validate_language_model_run(o, name);
  refuse_options_without_effect(o, name, language_model);
  if (o.epochs > 0 && o.data.empty() && o.train_size == 0)
    throw ValueError(cat(name("epochs"), " needs a fixed training set: give ", name("data"), " or ", name("train_size")));
  if (o.epochs > 0 && o.data.empty()) {  // the steps of a task's epochs, known now (a data file's: once it is read)
    const int64_t per_epoch = o.train_size / o.batch_size + (o.train_size % o.batch_size != 0);
    if (o.epochs > kMaxSteps / per_epoch)
      throw ValueError(cat(name("epochs"), " ", o.epochs, " x ", per_epoch, " steps an epoch (", name("train_size"), " ",
                           o.train_size, ", ", name("batch_size"), " ", o.batch_size, ") is more than ", kMaxSteps,
                           " steps"));
  }
  if (o.init.empty()) {  // with --init the model's shape is the checkpoint's
    if (language_model)
      validate_language_model(o, name);
    else
      validate_model(o, name);
  }
  if (!o.data.empty()) {
    if (o.valid.empty())
      require_real(name, o.valid_fraction > 0 && o.valid_fraction < 1, "valid_fraction",
              cat("in (0, 1) (the share of ", name("data"), " held out)"), o.valid_fraction);
  } else {
    validate_task(o.task, [&name](std::string_view field) { return name(cat("task.", field)); });
  }
  // Chosen by name from their registries (a user's program may have registered more).
  if (!optim::optimizers().find(o.optimizer))
    throw ValueError(cat(name("optimizer"), ": ", optim::optimizers().unknown(o.optimizer)));
  if (!optim::schedules().find(o.schedule))
    throw ValueError(cat(name("schedule"), ": ", optim::schedules().unknown(o.schedule)));
  validate_activation_checkpointing(o, name);
  check_memory_before_data(o, name);  // last: it needs every size in range
  std::error_code ec;
  if (std::filesystem::exists(o.out, ec) && !std::filesystem::is_directory(o.out, ec))
    throw ValueError(cat(name("out"), " ", o.out, " is a file, not a run directory"));
}

// One list of the fields trainer.json keeps (not verbose or detect_anomaly, which change only the output),
// from which it is written and, after checked_like's strict reading, read.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TaskOptions, name, symbols, min_len, max_len)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TrainOptions, task, data, valid, valid_fraction, train_size, valid_size, model, context_length,
                                   tokenizer, vocab_size, tokenizer_model, tie_embeddings, optimizer, lr, weight_decay, momentum, warmup, schedule, clip_grad, batch_size, steps,
                                   epochs, seed, threads, eval_every, log_every, target_acc, out, init, shuffle, overwrite)

bool checkpoints_activations(const std::string& mode, int64_t context_length, bool auxiliary_loss) {
  if (mode == "on") return true;
  return mode == "auto" && context_length >= kCheckpointFromPositions && !auxiliary_loss;
}

json to_json(const TrainOptions& options) {
  json j;
  to_json(j, options);
  return j;
}

TrainOptions train_options_from_json(const json& j, const std::string& path) {
  // Strict as config.json is (strict_json.h): trainer.json decides how a resumed run goes on, so a value
  // of the wrong type or a misspelt key must not be converted or ignored. Keys that came later are
  // optional: log_every, overwrite, valid_size, the language model's, and the model's (model_keys_added_later).
  // The model is read as config.json is (model_options_from_json: its settings, older keys, validated).
  static const std::set<std::string> added_later = {"log_every",  "overwrite",       "valid_size",
                                                    "tokenizer",  "tokenizer_model", "tie_embeddings",
                                                    "vocab_size"};
  json example = TrainOptions(), rest = j;
  example.erase("model");
  if (j.is_object()) {  // otherwise checked_like names what it is
    if (!j.contains("model")) throw IOError(cat(path, ": 'options.model' is missing"));
    rest.erase("model");
  }
  json checked = checked_like(rest, example, path, "options.", added_later);
  if (const int64_t threads = checked.at("threads").get<int64_t>(); threads < 0 || threads > kMaxThreads)
    throw IOError(cat(path, ": 'options.threads' = ", threads, " is outside [0, ", kMaxThreads, "]"));
  const nn::ClassifierOptions model = model_options_from_json(j.at("model"), path, "options.model.");
  checked["model"] = model_config_json(model);
  TrainOptions o = checked.get<TrainOptions>();
  o.model = model;
  // Runs from before --log-every wrote rows only at validations; resumed, they go on doing so.
  if (!j.contains("log_every")) o.log_every = o.eval_every;
  return o;
}

}  // namespace tapegrad
