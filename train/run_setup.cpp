#include "train/run_setup.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "autograd/autograd.h"
#include "optim/adam.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
#include "train/classifier_model.h"

namespace tapegrad {

namespace {

constexpr int64_t kDefaultSteps = 2000;

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainOptions& o, const nn::NamedTensors& params) {
  if (o.optimizer == "sgd")
    return std::make_unique<optim::SGD>(params, optim::SgdOptions{o.lr, o.momentum, 0, false, o.weight_decay});
  if (o.optimizer == "adam")
    return std::make_unique<optim::Adam>(params, optim::AdamOptions{o.lr, 0.9, 0.999, 1e-8, o.weight_decay});
  if (o.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{o.lr, 0.9, 0.999, 1e-8, o.weight_decay});
  throw ValueError(cat(option_field_name("optimizer"), ": '", o.optimizer, "' is not one of sgd, adam, adamw"));
}

}  // namespace

void fit_model_to_data(TrainOptions& o, const TrainingData& data) {
  const bool cls = nn::prepends_cls(o.model);
  if (o.context_length <= 0) o.context_length = data.longest + (cls ? 1 : 0);
  o.model.vocab_size = data.vocab.size();
  o.model.num_classes = static_cast<int64_t>(data.labels.size());
  o.model.context_length = o.context_length;
  o.model.pad_id = Vocab::kPad;
}

void build_model(Run& run, const ModelBuilder& build, Generator& init) {
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
  run.schedule = {optim::parse_schedule(o.schedule), o.lr, o.warmup, std::max(total, o.warmup + 1), 0};
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
