#include "train/run_setup.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "autograd/autograd.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/classifier_model.h"
#include "train/next_token_model.h"

namespace tapegrad {

namespace {

constexpr int64_t kDefaultSteps = 2000;

/// The optimizer registered as o.optimizer (optim/optimizer.h), built with the run's hyperparameters.
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainOptions& o, const nn::NamedTensors& params) {
  const optim::OptimizerEntry* entry = optim::optimizers().find(o.optimizer);
  if (!entry) throw ValueError(cat(option_field_name("optimizer"), ": ", optim::optimizers().unknown(o.optimizer)));
  return entry->make(params, {.lr = o.lr, .weight_decay = o.weight_decay, .momentum = o.momentum});
}

}  // namespace

nn::LanguageModelOptions language_model_options(const TrainOptions& o) {
  nn::LanguageModelOptions options = nn::language_model_options(o.model);
  options.context_length = language_model_context(o);
  options.tie_embeddings = o.tie_embeddings;
  return options;
}

void fit_model_to_data(TrainOptions& o, const TrainingData& data) {
  if (data.tokenizer) {
    o.context_length = language_model_context(o);
    o.model.vocab_size = data.tokenizer->vocab_size();
    o.model = nn::body_options(language_model_options(o));  // what trainer.json records: the LM's own reading
    return;
  }
  const bool cls = nn::prepends_cls(o.model);
  if (o.context_length <= 0) o.context_length = data.longest + (cls ? 1 : 0);
  o.model.vocab_size = data.vocab.size();
  o.model.num_classes = static_cast<int64_t>(data.labels.size());
  o.model.context_length = o.context_length;
  o.model.pad_id = Vocab::kPad;
}

namespace {

/// run.model: the language model of the run's options (a builder makes classifiers only).
void build_language_model(Run& run, Generator& init) {
  auto model = std::make_unique<nn::LanguageModel>(language_model_options(run.options), init, run.dropout_rng);
  nn::TransformerEncoder& encoder = model->encoder();
  const bool auxiliary_loss = encoder.n_layers() > 0 && encoder.layer(0).feed_forward().has_auxiliary_loss();
  encoder.set_activation_checkpointing(
      checkpoints_activations(run.options.activation_checkpointing, run.options.context_length, auxiliary_loss));
  run.model = std::make_unique<NextTokenModel>(std::move(model));
}

}  // namespace

void build_model(Run& run, const ModelBuilder& build, Generator& init) {
  if (run.data.tokenizer) return build_language_model(run, init);
  if (!build) throw ValueError("no model builder given");
  std::unique_ptr<nn::SequenceClassifier> classifier = build(run.options.model, init, run.dropout_rng);
  if (!classifier) throw ValueError("the model builder returned no model");
  const nn::ClassifierOptions& built = classifier->options();
  const nn::ClassifierOptions& data = run.options.model;
  for (auto [name, has, needs] : {std::tuple{"vocab_size", built.vocab_size, data.vocab_size},
                                  {"num_classes", built.num_classes, data.num_classes},
                                  {"context_length", built.context_length, data.context_length}})
    if (has != needs)
      throw ValueError(
          cat("the model builder built a model with ", name, " = ", has, ", but the data needs ", name, " = ", needs));
  run.options.model = built;
  nn::TransformerEncoder& encoder = classifier->encoder();
  const bool auxiliary_loss = encoder.n_layers() > 0 && encoder.layer(0).feed_forward().has_auxiliary_loss();
  encoder.set_activation_checkpointing(
      checkpoints_activations(run.options.activation_checkpointing, built.context_length, auxiliary_loss));
  run.model = std::make_unique<ClassifierModel>(std::move(classifier), run.data.vocab, run.data.labels);
}

void set_up_training(Run& run) {
  TrainOptions& o = run.options;
  int64_t& total = run.progress.total_steps;
  if (o.epochs > 0) {
    const int64_t step_batch = o.batch_size * run.ranks.comm->size();
    const int64_t per_epoch = (run.data.stream->size() + step_batch - 1) / step_batch;
    if (__builtin_mul_overflow(o.epochs, per_epoch, &total) || total > kMaxSteps)
      throw ValueError(cat("--epochs ", o.epochs, " x ", per_epoch, " steps an epoch is more than ", kMaxSteps, " steps"));
  } else {
    total = o.steps > 0 ? o.steps : kDefaultSteps;
  }
  run.optimizer = make_optimizer(o, run.model->module().named_parameters());
  run.schedule = {o.schedule, o.lr, o.warmup, std::max(total, o.warmup + 1), 0};
  run.schedule.lr_at(0);  // validates the schedule before any work
}

void try_forward(Run& run) {
  if (run.data.valid.empty()) return;
  NoGradGuard no_grad;
  const size_t n = std::min<size_t>(run.data.valid.size(), 2);
  nn::Module& module = run.model->module();
  module.eval();
  run.model->loss({run.data.valid.begin(), run.data.valid.begin() + static_cast<std::ptrdiff_t>(n)});
  module.train();
}

std::ostream& null_log() {
  static std::ostream none(nullptr);
  return none;
}

}  // namespace tapegrad
