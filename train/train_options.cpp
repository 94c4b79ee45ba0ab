#include "train/train_options.h"

#include <cmath>
#include <filesystem>

#include "autograd/error.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"
#include "train/strict_json.h"

namespace tapegrad {

using nlohmann::json;

namespace {

/// Bounds that only a typo exceeds (the memory check in the trainer catches what fits these but not the
/// machine).
constexpr int64_t kMaxWidth = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 1024;
constexpr int kMaxThreads = 1024;

}  // namespace

std::string option_field_name(std::string_view field) { return cat("TrainOptions.", field); }

void validate(const TrainOptions& o, const OptionNames& name) {
  const auto require = [&name](bool ok, std::string_view field, const std::string& rule, const auto& value) {
    if (!ok) throw ValueError(cat(name(field), " must be ", rule, ", got ", value));
  };
  // Comparisons are written so that NaN fails them.
  require(std::isfinite(o.lr) && o.lr >= 0, "lr", "a finite number >= 0", o.lr);  // 0 as in PyTorch: a frozen run
  require(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "weight_decay", "a finite number >= 0", o.weight_decay);
  require(std::isfinite(o.momentum) && o.momentum >= 0 && o.momentum < 1, "momentum", "in [0, 1)", o.momentum);
  require(std::isfinite(o.clip_grad) && o.clip_grad >= 0, "clip_grad", "a finite number >= 0 (0: off)", o.clip_grad);
  require(o.target_acc >= 0 && o.target_acc <= 1, "target_acc", "a fraction in [0, 1] (0: never stop early)", o.target_acc);
  require(o.model.dropout >= 0 && o.model.dropout < 1, "model.dropout", "in [0, 1)", o.model.dropout);
  require(o.batch_size > 0, "batch_size", "positive", o.batch_size);
  require(o.steps >= 0, "steps", "positive", o.steps);
  require(o.epochs >= 0, "epochs", "positive", o.epochs);
  require(o.warmup >= 0, "warmup", ">= 0", o.warmup);
  require(o.eval_every > 0, "eval_every", "positive", o.eval_every);
  require(o.log_every > 0, "log_every", "positive", o.log_every);
  require(o.threads >= 0 && o.threads <= kMaxThreads, "threads", cat("in [0, ", kMaxThreads, "] (0: every core)"), o.threads);
  require(o.train_size >= 0, "train_size", ">= 0 (0: fresh examples every batch)", o.train_size);
  require(o.context_length >= 0 && o.context_length <= kMaxLength, "context_length",
          cat("in [0, ", kMaxLength, "] (0: from the data)"), o.context_length);
  if (o.steps > 0 && o.epochs > 0) throw ValueError(cat("give ", name("steps"), " or ", name("epochs"), ", not both"));
  if (o.epochs > 0 && o.data.empty() && o.train_size == 0)
    throw ValueError(cat(name("epochs"), " needs a fixed training set: give ", name("data"), " or ", name("train_size")));
  if (o.init.empty()) {  // with --init the model's shape is the checkpoint's
    require(o.model.d_model > 0 && o.model.d_model <= kMaxWidth, "model.d_model", cat("in [1, ", kMaxWidth, "]"),
            o.model.d_model);
    require(o.model.n_heads > 0 && o.model.n_heads <= o.model.d_model, "model.n_heads",
            cat("in [1, ", name("model.d_model"), " = ", o.model.d_model, "]"), o.model.n_heads);
    if (o.model.d_model % o.model.n_heads != 0)
      throw ValueError(cat(name("model.d_model"), " ", o.model.d_model, " is not divisible by ", name("model.n_heads"), " ",
                           o.model.n_heads, ": each head gets d_model / heads dimensions"));
    require(o.model.d_ff > 0 && o.model.d_ff <= kMaxWidth, "model.d_ff", cat("in [1, ", kMaxWidth, "]"), o.model.d_ff);
    require(o.model.n_layers >= 0 && o.model.n_layers <= kMaxLayers, "model.n_layers", cat("in [0, ", kMaxLayers, "]"),
            o.model.n_layers);
  }
  if (!o.data.empty()) {
    if (o.valid.empty())
      require(o.valid_fraction > 0 && o.valid_fraction < 1, "valid_fraction",
              cat("in (0, 1) (the share of ", name("data"), " held out)"), o.valid_fraction);
  } else {
    validate_task(o.task);
  }
  if (o.optimizer != "sgd" && o.optimizer != "adam" && o.optimizer != "adamw")
    throw ValueError(cat(name("optimizer"), ": '", o.optimizer, "' is not one of sgd, adam, adamw"));
  optim::parse_schedule(o.schedule);  // a ValueError naming the choices
  std::error_code ec;
  if (std::filesystem::exists(o.out, ec) && !std::filesystem::is_directory(o.out, ec))
    throw ValueError(cat(name("out"), " ", o.out, " is a file, not a run directory"));
}

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
