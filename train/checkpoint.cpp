#include "train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "autograd/tape.h"
#include "train/safetensors.h"

namespace tapegrad {

namespace fs = std::filesystem;

namespace {

const char* kLinkedFiles[] = {"model.safetensors", "config.json",           "vocab.txt",
                              "labels.txt",        "optimizer.safetensors", "trainer.json"};

/// fsync of a file or folder by path: the bytes (or the folder's entries) reach the disk.
void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw IOError(cat(path, ": cannot open to sync"));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw IOError(cat(path, ": fsync failed"));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError(cat(path, ": cannot read"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Points link at target by creating link.tmp and renaming it over link (atomic on POSIX).
void swap_symlink(const fs::path& link, const fs::path& target) {
  const fs::path tmp = link.string() + ".tmp";
  std::error_code ignored;
  fs::remove(tmp, ignored);
  fs::create_directory_symlink(target, tmp);
  fs::rename(tmp, link);
}

template <class T>
T get(const nlohmann::json& config, const char* key, const std::string& path) {
  if (!config.contains(key)) throw IOError(cat(path, ": missing key '", key, "'"));
  try {
    return config.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw IOError(cat(path, ": key '", key, "' has the wrong type (", config.at(key).dump(), ")"));
  }
}

}  // namespace

nlohmann::json model_config_json(const nn::ClassifierOptions& o) {
  return {{"vocab_size", o.vocab_size},
          {"d_model", o.d_model},
          {"n_heads", o.n_heads},
          {"d_ff", o.d_ff},
          {"n_layers", o.n_layers},
          {"context_length", o.context_length},
          {"num_classes", o.num_classes},
          {"norm_first", o.norm_first},
          {"activation", o.activation == nn::Activation::gelu ? "gelu" : "relu"},
          {"pool", o.pool == nn::Pooling::cls ? "cls" : "mean"},
          {"positional", o.positional == nn::Positional::sinusoidal ? "sinusoidal" : "learned"},
          {"layer_norm_eps", o.layer_norm_eps},
          {"final_norm", o.final_norm},
          {"dropout", o.dropout},
          {"pad_id", o.pad_id}};
}

nn::ClassifierOptions read_model_config(const std::string& path) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_text(path));
  } catch (const nlohmann::json::parse_error& e) {
    throw IOError(cat(path, ": not valid JSON (", e.what(), ")"));
  }
  if (!config.is_object()) throw IOError(cat(path, ": expected a JSON object"));
  nn::ClassifierOptions o;
  o.vocab_size = get<int64_t>(config, "vocab_size", path);
  o.d_model = get<int64_t>(config, "d_model", path);
  o.n_heads = get<int64_t>(config, "n_heads", path);
  o.d_ff = get<int64_t>(config, "d_ff", path);
  o.n_layers = get<int64_t>(config, "n_layers", path);
  o.context_length = get<int64_t>(config, "context_length", path);
  o.num_classes = get<int64_t>(config, "num_classes", path);
  o.norm_first = get<bool>(config, "norm_first", path);
  o.layer_norm_eps = get<double>(config, "layer_norm_eps", path);
  o.final_norm = get<bool>(config, "final_norm", path);
  o.dropout = get<double>(config, "dropout", path);
  o.pad_id = get<int64_t>(config, "pad_id", path);
  try {
    o.activation = nn::parse_activation(get<std::string>(config, "activation", path));
    o.pool = nn::parse_pooling(get<std::string>(config, "pool", path));
    o.positional = nn::parse_positional(get<std::string>(config, "positional", path));
  } catch (const ValueError& e) {
    throw IOError(cat(path, ": ", e.what()));
  }
  const std::pair<const char*, int64_t> positive[] = {
      {"vocab_size", o.vocab_size},         {"d_model", o.d_model},        {"n_heads", o.n_heads}, {"d_ff", o.d_ff},
      {"context_length", o.context_length}, {"num_classes", o.num_classes}};
  for (auto [key, value] : positive)
    if (value <= 0 || value > (int64_t{1} << 24)) throw IOError(cat(path, ": '", key, "' = ", value, " is out of range"));
  // No encoder layers is a valid model (embeddings, pooling, head), as in nn::TransformerEncoder and PyTorch.
  if (o.n_layers < 0 || o.n_layers > (int64_t{1} << 24))
    throw IOError(cat(path, ": 'n_layers' = ", o.n_layers, " is out of range"));
  return o;
}

std::vector<std::string> read_labels(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IOError(cat(path, ": cannot read"));
  std::vector<std::string> labels;
  std::set<std::string> seen;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) throw IOError(cat(path, ":", number, ": empty label"));
    if (!seen.insert(line).second) throw IOError(cat(path, ":", number, ": duplicate label '", line, "'"));
    labels.push_back(line);
  }
  if (labels.empty()) throw IOError(cat(path, ": no labels"));
  return labels;
}

LoadedModel load_model(const std::string& dir) {
  LoadedModel loaded;
  loaded.options = read_model_config(dir + "/config.json");
  loaded.vocab = Vocab::load(dir + "/vocab.txt");
  loaded.labels = read_labels(dir + "/labels.txt");
  if (loaded.vocab.size() != loaded.options.vocab_size)
    throw IOError(cat(dir, "/vocab.txt: ", loaded.vocab.size(), " tokens, but config.json says vocab_size ",
                      loaded.options.vocab_size));
  if (static_cast<int64_t>(loaded.labels.size()) != loaded.options.num_classes)
    throw IOError(cat(dir, "/labels.txt: ", loaded.labels.size(), " labels, but config.json says num_classes ",
                      loaded.options.num_classes));
  Generator unused(0);
  loaded.model = std::make_unique<nn::SequenceClassifier>(loaded.options, unused, std::make_shared<Generator>(0));
  const std::string weights_path = dir + "/model.safetensors";
  SafetensorsFile weights = load_safetensors(weights_path);
  try {
    loaded.model->load_state_dict(weights.tensors);
  } catch (const Error& e) {
    throw IOError(cat(weights_path, ": ", e.what()));
  }
  loaded.model->eval();
  return loaded;
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw IOError(cat(path, ": cannot write"));
  }
  fsync_path(tmp);
  std::error_code error;
  fs::rename(tmp, path, error);
  if (error) throw IOError(cat(path, ": cannot rename into place (", error.message(), ")"));
  fsync_path(fs::path(path).parent_path().empty() ? "." : fs::path(path).parent_path().string());
}

void write_checkpoint_folder(const std::string& dir, const CheckpointContents& c) {
  fs::create_directories(dir);
  NoGradGuard no_grad;
  {
    nn::NamedTensors weights;  // float32 on disk, whatever the model computes in
    for (auto& [name, t] : c.model->state_dict()) weights.emplace_back(name, t.to(DType::float32));
    save_safetensors(dir + "/model.safetensors", weights, {{"format", "pt"}});
  }
  write_file_atomic(dir + "/config.json", model_config_json(c.model->options()).dump(2) + "\n");
  c.vocab->save(dir + "/vocab.txt");
  fsync_path(dir + "/vocab.txt");
  std::string labels;
  for (const auto& label : *c.labels) labels += label + "\n";
  write_file_atomic(dir + "/labels.txt", labels);
  if (c.optimizer) save_safetensors(dir + "/optimizer.safetensors", c.optimizer->state());
  if (!c.trainer_state.is_null()) write_file_atomic(dir + "/trainer.json", c.trainer_state.dump(2) + "\n");
  fsync_path(dir);
}

void publish_checkpoint(const std::string& out, int64_t step, const CheckpointContents& contents, bool is_best) {
  const fs::path root(out), store = root / ".checkpoints";
  fs::create_directories(store);
  // A fresh folder name: step-N, or step-N-k when step N was published before (the final checkpoint
  // right after a validation one), so the folder `latest` points at is never written into.
  std::string name;
  for (int k = 0; name.empty() || fs::exists(store / name); ++k) {
    char buf[48];
    std::snprintf(buf, sizeof buf, k ? "step-%09lld-%d" : "step-%09lld", static_cast<long long>(step), k);
    name = buf;
  }
  write_checkpoint_folder((store / name).string(), contents);
  fsync_path(store.string());  // the folder's own entry, before any link can point at it
  swap_symlink(root / "latest", fs::path(".checkpoints") / name);
  if (is_best) swap_symlink(root / "best", fs::path(".checkpoints") / name);
  fsync_path(root.string());

  std::error_code ignored;
  for (const char* file : kLinkedFiles) {  // the user-facing names, out/<file> -> latest/<file>, made once
    const fs::path link = root / file;
    if (fs::exists(root / "latest" / file) && !fs::is_symlink(link)) {
      fs::remove(link, ignored);
      fs::create_symlink(fs::path("latest") / file, link);
    }
  }
  std::set<fs::path> live;  // folders a link points at; the rest (older or half-written ones) go
  for (const char* link : {"latest", "best"})
    if (fs::is_symlink(root / link)) live.insert(fs::read_symlink(root / link).filename());
  for (const auto& entry : fs::directory_iterator(store))
    if (!live.count(entry.path().filename())) fs::remove_all(entry.path(), ignored);
}

}  // namespace tapegrad
