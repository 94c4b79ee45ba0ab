#include "train/checkpoint/checkpoint.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "autograd/tape.h"
#include "train/io/atomic_file.h"
#include "train/io/read_file.h"
#include "train/checkpoint/safetensors.h"
#include "train/io/strict_json.h"
#include "train/io/text_lines.h"

namespace tapegrad {

namespace fs = std::filesystem;

namespace {

const char* kLinkedFiles[] = {"model.safetensors", "config.json",    "vocab.txt",      "labels.txt",     "optimizer.safetensors",
                              "trainer.json",      "tokenizer.json", "tokenizer.model"};

/// Points link at target by creating link.tmp and renaming it over link (atomic on POSIX). Whatever was
/// at link -- an old link, a link planted to point elsewhere, a file -- is replaced, never followed; a
/// leftover link.tmp is removed first (remove() takes a link, not its target).
void swap_symlink(const fs::path& link, const fs::path& target) {
  const fs::path tmp = link.string() + ".tmp";
  std::error_code ignored;
  fs::remove(tmp, ignored);
  fs::create_symlink(target, tmp);
  fs::rename(tmp, link);
}

/// Whether anything, a dangling link included, is at p (fs::exists follows links).
bool entry_exists(const fs::path& p) { return fs::exists(fs::symlink_status(p)); }

}  // namespace

std::vector<std::string> parse_labels(std::string_view text, const std::string& path) {
  if (text.empty() || text == "\xef\xbb\xbf") throw IOError(cat(path, ": empty file: no labels"));
  std::vector<std::string> labels;
  std::set<std::string> seen;
  for_each_line(text, path, [&](int64_t number, std::string_view line) {
    const auto where = [&] { return cat(path, ":", number, ": "); };
    if (line.empty()) throw IOError(cat(where(), "empty label"));
    if (const size_t tab = line.find('\t'); tab != std::string_view::npos)
      throw IOError(cat(where(), "label contains a tab at byte ", tab + 1, " (a TSV label ends at the first tab)"));
    const std::string label(line);
    if (std::isspace(static_cast<unsigned char>(label.front())) || std::isspace(static_cast<unsigned char>(label.back())))
      throw IOError(cat(where(), "label '", label, "' has leading or trailing whitespace"));
    if (!seen.insert(label).second) throw IOError(cat(where(), "duplicate label ", in_quotes(label)));
    labels.push_back(label);
  });
  return labels;
}

std::vector<std::string> read_labels(const std::string& path) {
  return parse_labels(read_whole_file(path, kTokenListLimit), path);
}

std::string first_non_finite(const nn::NamedTensors& tensors) {
  for (const auto& entry : tensors) {  // not a structured binding: clang 14 cannot capture one
    const std::string& name = entry.first;
    const Tensor t = entry.second.contiguous();
    if (!is_floating(t.dtype())) continue;
    std::string found;
    dispatch_float(t.dtype(), "first_non_finite", [&](auto tag) {
      using T = decltype(tag);
      const T* values = t.data<T>();
      for (int64_t i = 0; i < t.numel() && found.empty(); ++i)
        if (!std::isfinite(values[i])) found = cat("'", name, "' element ", i, " is ", values[i]);
    });
    if (!found.empty()) return found;
  }
  return {};
}

namespace {

/// dir/model.safetensors, read (no more than the file holds) and checked before a model of `expected`
/// parameters is built: a config.json that claims a huge model beside a small weights file must not
/// allocate that model, and weights that are not finite are refused by tensor and element.
SafetensorsFile read_checked_weights(const std::string& dir, int64_t expected) {
  const std::string weights_path = dir + "/model.safetensors";
  SafetensorsFile weights = load_safetensors(weights_path);
  int64_t held = 0;
  for (const auto& [name, t] : weights.tensors) held += t.numel();  // <= the file's bytes: no overflow
  // Up to twice the file (plus 1M) is built so that load_state_dict can name what is missing; beyond
  // that the sizes alone say the two files do not belong together.
  if (expected > 2 * held + (int64_t{1} << 20))
    throw IOError(cat(weights_path, ": holds ", held, " values, but ", dir, "/config.json describes a model of ", expected,
                      " parameters"));
  if (const std::string bad = first_non_finite(weights.tensors); !bad.empty())
    throw IOError(cat(weights_path, ": tensor ", bad, " (the weights are not finite)"));
  return weights;
}

/// The weights into model, every mismatch an IOError naming the file; the model left in eval mode.
void load_checked_weights(nn::Module& model, const SafetensorsFile& weights, const std::string& dir) {
  try {
    model.load_state_dict(weights.tensors);
  } catch (const Error& e) {
    throw IOError(cat(dir, "/model.safetensors: ", e.what()));
  }
  model.eval();
}

}  // namespace

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
  const SafetensorsFile weights = read_checked_weights(dir, nn::parameter_count(loaded.options));
  Generator unused(0);
  loaded.model = std::make_unique<nn::SequenceClassifier>(loaded.options, unused, std::make_shared<Generator>(0));
  load_checked_weights(*loaded.model, weights, dir);
  return loaded;
}

std::string checkpoint_kind(const std::string& dir) {
  const std::string path = dir + "/config.json";
  const nlohmann::json config = parse_json_strictly(read_whole_file(path, kJsonFileLimit), path, 2);
  if (!config.is_object() || !config.contains("kind")) return kClassifierKind;
  const nlohmann::json& kind = config.at("kind");
  if (kind == kClassifierKind || kind == kLanguageModelKind) return kind.get<std::string>();
  throw IOError(cat(path, ": 'kind' is ", kind.dump(), ", not \"", kClassifierKind, "\" or \"", kLanguageModelKind, "\""));
}

LoadedLanguageModel load_language_model(const std::string& dir) {
  const std::string config_path = dir + "/config.json";
  const nlohmann::json config = parse_json_strictly(read_whole_file(config_path, kJsonFileLimit), config_path, 2);
  const nn::LanguageModelOptions options = language_model_options_from_json(config, config_path);
  LoadedLanguageModel loaded{options, Tokenizer::load(dir + "/tokenizer.json"), nullptr};
  if (loaded.tokenizer.vocab_size() != options.vocab_size)
    throw IOError(cat(dir, "/tokenizer.json: ", loaded.tokenizer.vocab_size(), " tokens, but config.json says vocab_size ",
                      options.vocab_size));
  // The tokenizer is part of the model: the embedding's row i was trained on the text of token i. An edited or
  // swapped tokenizer.json of the right size would read every text with other ids, and nothing else notices.
  if (const std::string recorded = tokenizer_digest_of(config, config_path);
      !recorded.empty() && recorded != loaded.tokenizer.digest())
    throw IOError(cat(dir, "/tokenizer.json: not the tokenizer this model was trained with (its digest is ",
                      loaded.tokenizer.digest(), ", config.json's ", kTokenizerDigestKey, " is ", recorded,
                      "): the tokens or their order were changed"));
  const SafetensorsFile weights = read_checked_weights(dir, nn::parameter_count(options));
  Generator unused(0);
  loaded.model = std::make_unique<nn::LanguageModel>(options, unused, std::make_shared<Generator>(0));
  load_checked_weights(*loaded.model, weights, dir);
  return loaded;
}

void load_optimizer_state(optim::Optimizer& optimizer, const std::string& path) {
  const SafetensorsFile state = load_safetensors(path);
  try {
    optimizer.load_state(state.tensors);
  } catch (const Error& e) {
    throw IOError(cat(path, ": ", e.what()));
  }
}

void write_checkpoint_folder(const std::string& dir, const CheckpointContents& c) {
  // Exactly this folder, made here: never one a run folder from elsewhere holds, which might be a link.
  if (!fs::create_directory(dir)) throw IOError(cat(dir, ": exists already; a checkpoint is written into a new folder"));
  NoGradGuard no_grad;
  {
    nn::NamedTensors weights;  // float32 on disk, whatever the model computes in
    for (auto& [name, t] : c.model->state_dict()) weights.emplace_back(name, t.to(DType::float32));
    save_safetensors(dir + "/model.safetensors", weights, {{"format", "pt"}});
  }
  nlohmann::json config = c.config;
  if (c.tokenizer) config[kTokenizerDigestKey] = c.tokenizer->digest();  // load_language_model compares them
  write_file_atomic(dir + "/config.json", config.dump(2) + "\n");
  if (c.vocab) c.vocab->save(dir + "/vocab.txt");
  if (c.labels) {
    std::string labels;
    for (const auto& label : *c.labels) labels += label + "\n";
    write_file_atomic(dir + "/labels.txt", labels);
  }
  if (c.tokenizer) c.tokenizer->save(dir + "/tokenizer.json");
  if (c.optimizer) save_safetensors(dir + "/optimizer.safetensors", c.optimizer->state());
  if (!c.trainer_state.is_null()) write_file_atomic(dir + "/trainer.json", c.trainer_state.dump(2) + "\n");
  fsync_path(dir);
}

// The durable order, each step on disk before the next relies on it (a power cut may lose any write
// or directory entry not yet fsynced, docs/reliability.md "Power loss"):
//   1. .checkpoints made (out fsynced), then step-N made, each file written to a .tmp, fsynced, renamed
//      in, step-N fsynced after each rename (write_file_atomic);
//   2. .checkpoints fsynced: step-N's own entry, before any link can point at it;
//   3. the user-facing links out/<file> -> latest/<file> where missing or wrong, then out fsynced;
//   4. `best` swapped, out fsynced; 5. `latest` swapped, out fsynced;
//   6. only then the folders nothing points at are removed (a cut during removal leaves debris that the
//      next publication removes, never a missing checkpoint).
// Nothing is written or removed outside out: .checkpoints must be a real folder (RunLock refuses a link
// there before the run starts; checked again here), step-N is created fresh, links are replaced rather
// than followed, and removal takes a link in .checkpoints, not what it points at.
void publish_checkpoint(const std::string& out, int64_t step, const CheckpointContents& contents, bool is_best) {
  const fs::path root(out), store = root / ".checkpoints";
  require_own_entry(store.string(), EntryKind::folder);
  if (create_directories_durably(store.string())) fsync_path(root.string());
  // A fresh folder name: step-N, or step-N-k when step N was published before (the final checkpoint
  // right after a validation one), so the folder `latest` points at is never written into. A name taken
  // by anything, even a dangling link, is passed over.
  std::string name;
  for (int k = 0; name.empty() || entry_exists(store / name); ++k) {
    char buf[48];
    std::snprintf(buf, sizeof buf, k ? "step-%09lld-%d" : "step-%09lld", static_cast<long long>(step), k);
    name = buf;
  }
  std::error_code ignored;
  try {
    write_checkpoint_folder((store / name).string(), contents);
  } catch (const Error&) {  // a full disk gets the space back now rather than at the next publication
    fs::remove_all(store / name, ignored);
    throw;
  }
  fsync_path(store.string());  // the folder's own entry, before any link can point at it
  // The user-facing names, out/<file> -> latest/<file>, made (or put right) before `latest` first exists:
  // made after it, a kill in between would leave a published run whose trainer.json --resume cannot find.
  bool relinked = false;
  for (const char* file : kLinkedFiles) {
    const fs::path link = root / file, wanted = fs::path("latest") / file;
    std::error_code not_a_link;
    if (fs::exists(store / name / file) && fs::read_symlink(link, not_a_link) != wanted) {
      swap_symlink(link, wanted);
      relinked = true;
    }
  }
  if (relinked) fsync_path(root.string());
  // `best` before `latest`, each on disk before the next: a cut between the two leaves `best` ahead of
  // `latest`, which a resume catches up with; the other order would leave `best` behind for good, though
  // trainer.json says otherwise.
  if (is_best) {
    swap_symlink(root / "best", fs::path(".checkpoints") / name);
    fsync_path(root.string());
  }
  swap_symlink(root / "latest", fs::path(".checkpoints") / name);
  fsync_path(root.string());

  std::set<fs::path> live;  // folders a link points at; the rest (older or half-written ones) go
  for (const char* link : {"latest", "best"})
    if (fs::is_symlink(root / link)) live.insert(fs::read_symlink(root / link).filename());
  // remove_all does not follow links: an entry that is a link, or a link inside an old folder, goes
  // itself; what it points at, inside out or outside, stays.
  for (const auto& entry : fs::directory_iterator(store))
    if (!live.count(entry.path().filename())) fs::remove_all(entry.path(), ignored);
}

}  // namespace tapegrad
