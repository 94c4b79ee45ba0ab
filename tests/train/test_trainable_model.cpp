// A second kind of model trained by the same loop: the loop, the step and publishing know only the
// TrainableModel interface (train/trainable_model.h), so a model that is not the classifier (here a bag of
// words: the mean of the token embeddings, then a linear layer) trains, validates and checkpoints through
// run_training_loop unchanged, as the language model of a later issue will.
#include <catch2/catch.hpp>
#include <memory>
#include <sstream>

#include "autograd/autograd.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "optim/adam.h"
#include "support/temp_dir.h"
#include "train/checkpoint/model_config.h"
#include "train/checkpoint/safetensors.h"
#include "train/classifier_model.h"
#include "train/data/batching.h"
#include "train/io/read_file.h"
#include "train/run_state.h"
#include "train/training_loop.h"

using namespace tapegrad;
using tapegrad::testing::TempDir;

namespace {

class BagOfWords : public nn::Module {
 public:
  BagOfWords(int64_t vocab, int64_t width, int64_t classes, Generator& init) {
    embed_ = &register_module("embed", std::make_unique<nn::Embedding>(vocab, width, init, Vocab::kPad));
    head_ = &register_module("head", std::make_unique<nn::Linear>(width, classes, true, init));
  }
  ///   head(mean over T of embed(ids))   ids: (B, T) -> (B, K); the pads' embedding row is zero
  Tensor forward(const Tensor& ids) const { return head_->forward(mean(embed_->forward(ids), 1)); }

 private:
  nn::Embedding* embed_;
  nn::Linear* head_;
};

class BagOfWordsModel : public TrainableModel {
 public:
  BagOfWordsModel(const TrainingData& data, int64_t context_length, Generator& init)
      : data_(data), context_length_(context_length),
        net_(data.vocab.size(), 16, static_cast<int64_t>(data.labels.size()), init) {}

  nn::Module& module() override { return net_; }
  BatchLoss loss(const std::vector<Example>& examples) override {
    const Batch batch = make_batch(examples, data_.vocab, data_.labels, context_length_, false);
    return {cross_entropy(net_.forward(batch.ids), batch.targets), {}, batch.truncated};
  }
  Evaluation evaluate(const std::vector<Example>& examples, int64_t) override {
    NoGradGuard no_grad;
    const Batch batch = make_batch(examples, data_.vocab, data_.labels, context_length_, false);
    const Tensor logits = net_.forward(batch.ids);
    const std::vector<int64_t> predicted = argmax(logits, 1).to_int_vector(), truth = batch.targets.to_int_vector();
    int64_t correct = 0;
    for (size_t i = 0; i < truth.size(); ++i) correct += predicted[i] == truth[i];
    Evaluation e;
    e.count = static_cast<int64_t>(truth.size());
    e.loss = cross_entropy(logits, batch.targets).item();
    e.accuracy = static_cast<double>(correct) / static_cast<double>(e.count);
    return e;
  }
  nlohmann::json config() const override { return {{"kind", "bag_of_words"}, {"width", 16}}; }

 private:
  const TrainingData& data_;
  int64_t context_length_;
  BagOfWords net_;
};

}  // namespace

TEST_CASE("train: a model kind other than the classifier trains, validates and checkpoints through the same loop") {
  TempDir dir("tapegrad_test_trainable_model");
  Run run;
  TrainOptions& o = run.options;
  o.task = {"majority", 4, 8, 16};
  o.valid_size = 200;
  o.context_length = 16;
  o.batch_size = 32;
  o.eval_every = 50;
  o.log_every = 10;
  o.out = dir / "run";
  run.data = load_training_data(o, nullptr);
  Generator init(1);
  run.dropout_rng = std::make_shared<Generator>(2);
  run.model = std::make_unique<BagOfWordsModel>(run.data, o.context_length, init);
  run.optimizer = std::make_unique<optim::Adam>(run.model->module().named_parameters(), optim::AdamOptions{0.05});
  run.schedule = {"constant", 0.05, 0, 150, 0};
  run.progress.total_steps = 150;

  std::ostringstream log;
  const TrainSummary summary = run_training_loop(run, log);
  CHECK(summary.steps == 150);
  CHECK(summary.final_accuracy > 0.6);  // 4 classes: chance is 0.25; the counts of words decide the label
  CHECK(run.progress.published_step == 150);
  // The checkpoint holds what the model says rebuilds it, and its own weights.
  const std::string latest = o.out + "/latest";
  CHECK(nlohmann::json::parse(read_whole_file(latest + "/config.json", kJsonFileLimit)) ==
        nlohmann::json{{"kind", "bag_of_words"}, {"width", 16}});
  const SafetensorsFile weights = load_safetensors(latest + "/model.safetensors");
  CHECK(weights.contains("embed.weight"));
  CHECK(weights.contains("head.bias"));
}

TEST_CASE("train: the classifier's config.json names its kind and reads back as the same options") {
  nn::ClassifierOptions options = nn::micro_classifier();
  Generator init(3);
  Vocab vocab;
  const std::vector<std::string> labels = {"a", "b", "c"};
  const ClassifierModel model(std::make_unique<nn::SequenceClassifier>(options, init, nullptr), vocab, labels);
  const nlohmann::json config = model.config();
  CHECK(config.at("kind") == "classifier");
  CHECK(model_config_json(parse_model_config(config.dump(), "config.json")) == model_config_json(options));
}
