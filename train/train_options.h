#pragma once
// What `tapegrad train` takes: the options of a run, and their JSON form in trainer.json (what --resume
// reads back).
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "nn/classifier.h"
#include "train/data/tasks.h"

namespace tapegrad {

/// The default model of `tapegrad train`: d_model 32, 2 heads, d_ff 64, 2 layers, no dropout.
inline nn::ClassifierOptions default_model() {
  nn::ClassifierOptions model;
  model.vocab_size = 0;  // from the data
  model.d_model = 32;
  model.n_heads = 2;
  model.d_ff = 64;
  model.n_layers = 2;
  model.dropout = 0;
  return model;
}

/// The task name of a language model: next-token prediction over the text of TrainOptions::data.
inline constexpr const char* kLanguageModelTask = "lm";
/// A language model's context length when TrainOptions::context_length is 0.
inline constexpr int64_t kDefaultLanguageModelContext = 128;

/// Everything `tapegrad train` takes. Zero means "derive it" where noted.
struct TrainOptions {
  // data: a built-in task, a TSV file of label<TAB>text, or (task "lm") a text file for a language model
  TaskOptions task{"majority"};
  std::string data;               // training TSV (replaces the task), or the language model's training text
  std::string valid;              // validation TSV or text; empty: a seeded split of data (a text: its end)
  double valid_fraction = 0.1;    // of data, when valid is empty
  int64_t train_size = 0;         // task only: a fixed training set of this many examples; 0: fresh each batch
  int64_t valid_size = 2000;      // task only: examples in the validation set (long sequences: fewer)
  // model (vocab_size, num_classes and context_length are filled in from the data). The defaults are a
  // small model that learns the built-in tasks to 99% in a few hundred steps.
  nn::ClassifierOptions model = default_model();
  int64_t context_length = 0;     // 0: the longest sequence the task or the training file can produce (lm: 128)
  // language model only (task "lm"; train/data/tokenizer.h)
  std::string tokenizer = "characters";  // characters, words or bpe
  int64_t vocab_size = 2000;             // bpe: the pieces SentencePiece learns from the training text
  std::string tokenizer_model;           // bpe: an existing SentencePiece model instead of learning one
  bool tie_embeddings = false;           // the head's weight is the token embedding's
  // optimisation
  std::string optimizer = "adamw";  // a registered optimizer (optim/optimizer.h): adam, adamw, sgd, or a user's
  double lr = 5e-3;
  double weight_decay = 0.01;
  double momentum = 0.9;          // sgd only
  int64_t warmup = 0;             // linear warm-up steps
  std::string schedule = "constant";  // a registered schedule (optim/schedule.h): constant, cosine, linear, or a user's
  double clip_grad = 0;           // global-norm clipping; 0: off
  int64_t batch_size = 64;
  int64_t steps = 0;              // total optimizer steps; 0: from epochs, or 2000
  int64_t epochs = 0;             // passes over a fixed training set (data or train_size)
  uint64_t seed = 0;
  int threads = 0;                // threads for everything, BLAS included (0: every core; measured in docs/performance.md)
  // evaluation and output
  int64_t eval_every = 100;
  int64_t log_every = 10;         // a training-loss row in metrics.csv every this many steps
  double target_acc = 0;          // stop once validation accuracy reaches it (a fraction); 0: never
  std::string out = "runs/latest";
  std::string init;               // start from a checkpoint's weights and vocabulary, fresh optimizer
  bool shuffle = true;
  bool overwrite = false;         // replace a run already in `out` (refused otherwise)
  bool verbose = false;           // also log the threads and BLAS kernels in use (output only: not saved)
  bool detect_anomaly = false;    // check every op for NaN and Inf, naming the first (debugging only: not saved)
  // Recompute the encoder layers' activations in backward: "auto" (kCheckpointFromPositions), "on", "off".
  // Memory only, not the numbers: not saved.
  std::string activation_checkpointing = "auto";
};

/// Whether the run trains a language model (task kLanguageModelTask) rather than a classifier.
inline bool is_language_model(const TrainOptions& options) { return options.task.name == kLanguageModelTask; }

/// The context length a run's model gets: the option, or when 0 the language model's default (a classifier's
/// comes from its data: fit_model_to_data).
int64_t language_model_context(const TrainOptions& options);

/// --activation-checkpointing auto's threshold: from this context length on, the layers' activations are the
/// bulk of a step's memory and recomputing them costs little of its time (docs/performance.md, "Activation
/// checkpointing").
inline constexpr int64_t kCheckpointFromPositions = 1024;

/// Whether a model's encoder layers are checkpointed: mode "on" or "off"; "auto" from kCheckpointFromPositions
/// positions on, unless the layers leave an auxiliary loss (moe), which a checkpointed layer cannot record.
bool checkpoints_activations(const std::string& mode, int64_t context_length, bool auxiliary_loss);

/// The most steps a run takes (from --steps, or --epochs x the steps of an epoch): the steps a double counts
/// exactly, as the learning-rate schedule computes in doubles; only a typo exceeds it.
inline constexpr int64_t kMaxSteps = int64_t{1} << 53;

/// How validate() names an option, given the field's path in TrainOptions ("lr", "model.d_model").
using OptionNames = std::function<std::string(std::string_view field)>;

/// The library's name of an option: "TrainOptions." + field ("TrainOptions.model.d_model").
std::string option_field_name(std::string_view field);

/// Refuses values no run can use, before any work starts: a ValueError naming the option, the value and
/// the range ("TrainOptions.lr must be a finite number >= 0, got nan"). The command line passes its flag
/// names ("--lr must be ..."), so that one set of rules serves both. Options that only make sense together
/// (a task flag with --data, a model flag with --init) are the command line's to refuse: it knows which
/// were given.
void validate(const TrainOptions& options, const OptionNames& name = option_field_name);

/// Refuses an activation_checkpointing other than auto, on or off, and "on" for layers whose ffn leaves an
/// auxiliary loss (FeedForwardKind's auxiliary_loss: moe), naming the options as `name` does.
void validate_activation_checkpointing(const TrainOptions& options, const OptionNames& name);

nlohmann::json to_json(const TrainOptions& options);
/// The options object of trainer.json (path names the file in errors), read as strictly as config.json:
/// every key present (log_every and overwrite may be absent in older runs), of exactly its type, no
/// unknown key, and the model validated; IOError "path: 'options.<key>' what is wrong" otherwise.
TrainOptions train_options_from_json(const nlohmann::json& json, const std::string& path);

}  // namespace tapegrad
