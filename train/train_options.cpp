#include "train/train_options.h"

#include <cmath>
#include <filesystem>

#include "autograd/error.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"

namespace tapegrad {

using nlohmann::json;

namespace {

/// Bounds that only a typo exceeds (the memory check in the trainer catches what fits these but not the
/// machine).
constexpr int64_t kMaxWidth = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 1024;
constexpr int kMaxThreads = 1024;

void require(bool ok, const char* flag, const std::string& rule, const auto& value) {
  if (!ok) throw ValueError(cat(flag, " must be ", rule, ", got ", value));
}

}  // namespace

void validate(const TrainOptions& o) {
  // Comparisons are written so that NaN fails them.
  require(std::isfinite(o.lr) && o.lr >= 0, "--lr", "a finite number >= 0", o.lr);  // 0 as in PyTorch: a frozen run
  require(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "--weight-decay", "a finite number >= 0", o.weight_decay);
  require(std::isfinite(o.momentum) && o.momentum >= 0 && o.momentum < 1, "--momentum", "in [0, 1)", o.momentum);
  require(std::isfinite(o.clip_grad) && o.clip_grad >= 0, "--clip-grad", "a finite number >= 0 (0: off)", o.clip_grad);
  require(o.target_acc >= 0 && o.target_acc <= 1, "--target-acc", "a fraction in [0, 1] (0: never stop early)", o.target_acc);
  require(o.model.dropout >= 0 && o.model.dropout < 1, "--dropout", "in [0, 1)", o.model.dropout);
  require(o.batch_size > 0, "--batch-size", "positive", o.batch_size);
  require(o.steps >= 0, "--steps", "positive", o.steps);
  require(o.epochs >= 0, "--epochs", "positive", o.epochs);
  require(o.warmup >= 0, "--warmup", ">= 0", o.warmup);
  require(o.eval_every > 0, "--eval-every", "positive", o.eval_every);
  require(o.log_every > 0, "--log-every", "positive", o.log_every);
  require(o.threads >= 0 && o.threads <= kMaxThreads, "--threads", cat("in [0, ", kMaxThreads, "] (0: every core)"), o.threads);
  require(o.train_size >= 0, "--train-size", ">= 0 (0: fresh examples every batch)", o.train_size);
  require(o.context_length >= 0 && o.context_length <= kMaxLength, "--context-length",
          cat("in [0, ", kMaxLength, "] (0: from the data)"), o.context_length);
  if (o.steps > 0 && o.epochs > 0) throw ValueError("give --steps or --epochs, not both");
  if (o.init.empty()) {  // with --init the model's shape is the checkpoint's
    require(o.model.d_model > 0 && o.model.d_model <= kMaxWidth, "--d-model", cat("in [1, ", kMaxWidth, "]"), o.model.d_model);
    require(o.model.n_heads > 0 && o.model.n_heads <= o.model.d_model, "--heads", cat("in [1, --d-model = ", o.model.d_model, "]"),
            o.model.n_heads);
    if (o.model.d_model % o.model.n_heads != 0)
      throw ValueError(cat("--d-model ", o.model.d_model, " is not divisible by --heads ", o.model.n_heads,
                           ": each head gets d_model / heads dimensions"));
    require(o.model.d_ff > 0 && o.model.d_ff <= kMaxWidth, "--ff", cat("in [1, ", kMaxWidth, "]"), o.model.d_ff);
    require(o.model.n_layers >= 0 && o.model.n_layers <= kMaxLayers, "--layers", cat("in [0, ", kMaxLayers, "]"), o.model.n_layers);
  }
  if (!o.data.empty()) {
    if (o.valid.empty())
      require(o.valid_fraction > 0 && o.valid_fraction < 1, "--valid-fraction", "in (0, 1) (the share of --data held out)",
              o.valid_fraction);
  } else {
    validate_task(o.task);
  }
  if (o.optimizer != "sgd" && o.optimizer != "adam" && o.optimizer != "adamw")
    throw ValueError(cat("--optimizer: '", o.optimizer, "' is not one of sgd, adam, adamw"));
  optim::parse_schedule(o.schedule);  // a ValueError naming the choices
  std::error_code ec;
  if (std::filesystem::exists(o.out, ec) && !std::filesystem::is_directory(o.out, ec))
    throw ValueError(cat("--out ", o.out, " is a file, not a run directory"));
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
  try {
    TrainOptions o;
    const json& t = j.at("task");
    o.task = {t.at("name").get<std::string>(), t.at("symbols").get<int64_t>(), t.at("min_len").get<int64_t>(),
              t.at("max_len").get<int64_t>()};
    o.data = j.at("data").get<std::string>();
    o.valid = j.at("valid").get<std::string>();
    o.valid_fraction = j.at("valid_fraction").get<double>();
    o.train_size = j.at("train_size").get<int64_t>();
    const json& m = j.at("model");
    o.model.vocab_size = m.at("vocab_size").get<int64_t>();
    o.model.d_model = m.at("d_model").get<int64_t>();
    o.model.n_heads = m.at("n_heads").get<int64_t>();
    o.model.d_ff = m.at("d_ff").get<int64_t>();
    o.model.n_layers = m.at("n_layers").get<int64_t>();
    o.model.context_length = m.at("context_length").get<int64_t>();
    o.model.num_classes = m.at("num_classes").get<int64_t>();
    o.model.norm_first = m.at("norm_first").get<bool>();
    o.model.activation = nn::parse_activation(m.at("activation").get<std::string>());
    o.model.pool = nn::parse_pooling(m.at("pool").get<std::string>());
    o.model.positional = nn::parse_positional(m.at("positional").get<std::string>());
    o.model.layer_norm_eps = m.at("layer_norm_eps").get<double>();
    o.model.final_norm = m.at("final_norm").get<bool>();
    o.model.dropout = m.at("dropout").get<double>();
    o.model.pad_id = m.at("pad_id").get<int64_t>();
    o.context_length = j.at("context_length").get<int64_t>();
    o.optimizer = j.at("optimizer").get<std::string>();
    o.lr = j.at("lr").get<double>();
    o.weight_decay = j.at("weight_decay").get<double>();
    o.momentum = j.at("momentum").get<double>();
    o.warmup = j.at("warmup").get<int64_t>();
    o.schedule = j.at("schedule").get<std::string>();
    o.clip_grad = j.at("clip_grad").get<double>();
    o.batch_size = j.at("batch_size").get<int64_t>();
    o.steps = j.at("steps").get<int64_t>();
    o.epochs = j.at("epochs").get<int64_t>();
    o.seed = j.at("seed").get<uint64_t>();
    o.threads = j.at("threads").get<int>();
    o.eval_every = j.at("eval_every").get<int64_t>();
    // Runs from before --log-every wrote rows only at validations; resumed, they go on doing so.
    o.log_every = j.value("log_every", o.eval_every);
    o.target_acc = j.at("target_acc").get<double>();
    o.out = j.at("out").get<std::string>();
    o.init = j.at("init").get<std::string>();
    o.shuffle = j.at("shuffle").get<bool>();
    o.overwrite = j.value("overwrite", false);
    return o;
  } catch (const json::exception& e) {
    throw IOError(cat(path, ": malformed training options (", e.what(), ")"));
  } catch (const ValueError& e) {
    throw IOError(cat(path, ": ", e.what()));
  }
}

}  // namespace tapegrad
