#pragma once
// Checkpoint directories. A checkpoint holds
//   model.safetensors      float32 weights with PyTorch's state names and layouts
//   config.json            everything needed to rebuild the model (nn::ClassifierOptions)
//   vocab.txt, labels.txt  the tokenizer's vocabulary (line = id) and the class labels (line = class)
//   optimizer.safetensors  optimizer state, and trainer.json (step, schedule, every RNG state): for --resume
//
// A run directory keeps its checkpoints whole across kills: each one is written into a fresh folder
// .checkpoints/step-N (every file fsynced), and only then published by atomically renaming a symlink
// `latest` (and `best`) to point at it. The names users open — out/model.safetensors, out/config.json, ...
// and out/best/... — resolve through those symlinks, so at any moment they show one complete checkpoint.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/classifier.h"
#include "optim/optimizer.h"
#include "train/vocab.h"

namespace tapegrad {

/// config.json of a classifier; the keys are documented in docs/checkpoints.md.
nlohmann::json model_config_json(const nn::ClassifierOptions& options);
/// Reads and validates config.json (IOError naming the file and the key).
nn::ClassifierOptions read_model_config(const std::string& path);

/// What `predict`, `eval` and `--init` need of a checkpoint.
struct LoadedModel {
  nn::ClassifierOptions options;
  Vocab vocab;
  std::vector<std::string> labels;
  std::unique_ptr<nn::SequenceClassifier> model;
};
/// Loads config.json, vocab.txt, labels.txt and model.safetensors from dir, with checks that they agree
/// (vocabulary size, number of labels, every weight's name and shape); IOError naming the file otherwise.
LoadedModel load_model(const std::string& dir);

/// Everything one checkpoint write needs.
struct CheckpointContents {
  const nn::SequenceClassifier* model = nullptr;
  const Vocab* vocab = nullptr;
  const std::vector<std::string>* labels = nullptr;
  const optim::Optimizer* optimizer = nullptr;  // optional
  nlohmann::json trainer_state;                 // optional (null: no trainer.json)
};

/// Writes a complete checkpoint into dir (which must not exist yet), fsyncing every file and the folder.
void write_checkpoint_folder(const std::string& dir, const CheckpointContents& contents);

/// Publishes a checkpoint of `step` in run directory out: writes .checkpoints/step-N, points `latest`
/// at it (and `best` too when is_best), creates the user-facing links on first use and removes
/// checkpoint folders nothing points at any more (including ones a killed run left half-written).
void publish_checkpoint(const std::string& out, int64_t step, const CheckpointContents& contents, bool is_best);

/// Reads labels.txt (one label per line); IOError naming file and line for an empty or duplicate one.
std::vector<std::string> read_labels(const std::string& path);

/// Writes text to path atomically (path.tmp, fsync, rename, fsync of the folder).
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace tapegrad
