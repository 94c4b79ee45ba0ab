#include "train/train_options.h"

#include "autograd/error.h"
#include "train/checkpoint.h"
#include "train/strict_json.h"

namespace tapegrad {

using nlohmann::json;

json to_json(const TrainOptions& o) {
  return {{"task", {{"name", o.task.name}, {"symbols", o.task.symbols}, {"min_len", o.task.min_len}, {"max_len", o.task.max_len}}},
          {"data", o.data},
          {"valid", o.valid},
          {"valid_fraction", o.valid_fraction},
          {"train_size", o.train_size},
          {"model", model_config_json(o.model)},
          {"context_length", o.context_length},
          {"optimizer", o.optimizer},
          {"lr", o.lr},
          {"weight_decay", o.weight_decay},
          {"momentum", o.momentum},
          {"warmup", o.warmup},
          {"schedule", o.schedule},
          {"clip_grad", o.clip_grad},
          {"batch_size", o.batch_size},
          {"steps", o.steps},
          {"epochs", o.epochs},
          {"seed", o.seed},
          {"threads", o.threads},
          {"eval_every", o.eval_every},
          {"log_every", o.log_every},
          {"target_acc", o.target_acc},
          {"out", o.out},
          {"init", o.init},
          {"shuffle", o.shuffle},
          {"overwrite", o.overwrite}};
}

TrainOptions train_options_from_json(const json& j, const std::string& path) {
  // Strict as config.json is (strict_json.h): trainer.json decides how a resumed run goes on, so a value
  // of the wrong type or a misspelt key must not be converted or ignored.
  JsonFields f(j, path, "options.");
  TrainOptions o;
  {
    JsonFields t(f.object("task"), path, "options.task.");
    o.task = {t.string("name"), t.integer("symbols"), t.integer("min_len"), t.integer("max_len")};
    t.refuse_unknown();
  }
  o.data = f.string("data");
  o.valid = f.string("valid");
  o.valid_fraction = f.number("valid_fraction");
  o.train_size = f.integer("train_size");
  o.model = model_options_from_json(f.object("model"), path, "options.model.");
  o.context_length = f.integer("context_length");
  o.optimizer = f.string("optimizer");
  o.lr = f.number("lr");
  o.weight_decay = f.number("weight_decay");
  o.momentum = f.number("momentum");
  o.warmup = f.integer("warmup");
  o.schedule = f.string("schedule");
  o.clip_grad = f.number("clip_grad");
  o.batch_size = f.integer("batch_size");
  o.steps = f.integer("steps");
  o.epochs = f.integer("epochs");
  o.seed = f.unsigned_integer("seed");
  const int64_t threads = f.integer("threads");
  if (threads < 0 || threads > 4096)
    throw IOError(cat(path, ": ", f.quoted("threads"), " = ", threads, " is outside [0, 4096]"));
  o.threads = static_cast<int>(threads);
  o.eval_every = f.integer("eval_every");
  // Runs from before --log-every wrote rows only at validations; resumed, they go on doing so.
  o.log_every = f.has("log_every") ? f.integer("log_every") : o.eval_every;
  o.target_acc = f.number("target_acc");
  o.out = f.string("out");
  o.init = f.string("init");
  o.shuffle = f.boolean("shuffle");
  o.overwrite = f.has("overwrite") ? f.boolean("overwrite") : false;
  f.refuse_unknown();
  return o;
}

}  // namespace tapegrad
