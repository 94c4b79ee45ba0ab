#include "train/train_options.h"

#include "autograd/error.h"
#include "train/checkpoint.h"

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
