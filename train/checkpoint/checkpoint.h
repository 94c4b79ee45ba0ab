#pragma once
// Checkpoint directories. A checkpoint holds
//   model.safetensors      float32 weights with PyTorch's state names and layouts
//   config.json            everything needed to rebuild the model (nn::ClassifierOptions; a language model's
//                          nn::LanguageModelOptions with "kind": "language_model")
//   vocab.txt, labels.txt  a classifier's vocabulary (line = id) and class labels (line = class)
//   tokenizer.json         a language model's tokenizer (train/data/tokenizer.h), in their place
//   optimizer.safetensors  optimizer state, and trainer.json (step, schedule, every RNG state): for --resume
//
// A run directory keeps its checkpoints whole across kills: each one is written into a fresh folder
// .checkpoints/step-N (every file fsynced), and only then published by atomically renaming a symlink
// `latest` (and `best`) to point at it. The names users open — out/model.safetensors, out/config.json, ...
// and out/best/... — resolve through those symlinks, so at any moment they show one complete checkpoint.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/classifier.h"
#include "train/checkpoint/model_config.h"
#include "optim/optimizer.h"
#include "nn/language_model.h"
#include "train/data/tokenizer.h"
#include "train/data/vocab.h"

namespace tapegrad {

/// What `predict`, `eval` and `--init` need of a checkpoint.
struct LoadedModel {
  nn::ClassifierOptions options;
  Vocab vocab;
  std::vector<std::string> labels;
  std::unique_ptr<nn::SequenceClassifier> model;
};
/// Loads config.json, vocab.txt, labels.txt and model.safetensors from dir, with checks that they agree
/// (vocabulary size, number of labels, every weight's name, shape and dtype, all at once) and that every
/// weight is finite (the first NaN or infinity is named by tensor and element); IOError naming the file
/// otherwise. The weights file is read before the model is built, and a config.json describing a model
/// more than twice the size of the weights file is refused without building it.
LoadedModel load_model(const std::string& dir);

/// What `generate`, `eval` and --init need of a language model's checkpoint.
struct LoadedLanguageModel {
  nn::LanguageModelOptions options;
  Tokenizer tokenizer;
  std::unique_ptr<nn::LanguageModel> model;  // in eval mode
};
/// Loads config.json (kind language_model), tokenizer.json and model.safetensors from dir, with load_model's
/// checks (the tokenizer's size against vocab_size); IOError naming the file otherwise.
LoadedLanguageModel load_language_model(const std::string& dir);

/// config.json's "kind" in dir: kClassifierKind (also when the key is absent: older checkpoints) or
/// kLanguageModelKind; IOError naming the file when it cannot be read or names another kind.
std::string checkpoint_kind(const std::string& dir);

/// Reads optimizer.safetensors into optimizer (Optimizer::load_state: every missing, unexpected or wrongly
/// shaped entry named at once); every error is an IOError naming the file.
void load_optimizer_state(optim::Optimizer& optimizer, const std::string& path);

/// Everything one checkpoint write needs; any kind of model (the classifier's config is model_config_json).
struct CheckpointContents {
  const nn::Module* model = nullptr;  // its state_dict, float32 on disk
  nlohmann::json config;              // config.json: what rebuilds the model with the weights
  const Vocab* vocab = nullptr;                      // a classifier's, with labels
  const std::vector<std::string>* labels = nullptr;
  const optim::Optimizer* optimizer = nullptr;  // optional
  nlohmann::json trainer_state;                 // optional (null: no trainer.json)
  const Tokenizer* tokenizer = nullptr;         // a language model's, in place of vocab and labels
};

/// Writes a complete checkpoint into dir (which must not exist yet), fsyncing every file and the folder.
void write_checkpoint_folder(const std::string& dir, const CheckpointContents& contents);

/// Publishes a checkpoint of `step` in run directory out: writes .checkpoints/step-N, points `latest`
/// at it (and `best` too when is_best), creates the user-facing links on first use and removes
/// checkpoint folders nothing points at any more (including ones a killed run left half-written).
void publish_checkpoint(const std::string& out, int64_t step, const CheckpointContents& contents, bool is_best);

/// Parses the text of labels.txt: one label per line, line k (1-based) naming class k - 1. As vocab.txt, a
/// UTF-8 byte order mark at the start and a '\r' before each '\n' are accepted. A label is what a TSV
/// label can be: non-empty valid UTF-8 without a tab, a NUL byte or leading or trailing whitespace (a
/// label cannot hold a newline: it is one line). An empty file, a bad or duplicate label are IOErrors
/// naming `name` (the file) and the line.
std::vector<std::string> parse_labels(std::string_view text, const std::string& name);
/// The first NaN or infinity among the float tensors, as "'name' element i is nan"; empty when all are finite.
std::string first_non_finite(const nn::NamedTensors& tensors);

/// Reads labels.txt (a regular file or a pipe, at most 256 MiB) and parses it.
std::vector<std::string> read_labels(const std::string& path);

}  // namespace tapegrad
