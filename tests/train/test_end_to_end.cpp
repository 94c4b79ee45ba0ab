// The trainer end to end, through the library: the default model learns majority and order to 99%,
// resume is bit-identical to an uninterrupted run (task stream, shuffled fixed set, dropout), --init
// starts from a checkpoint's weights with a fresh optimizer, and a run directory always shows one whole
// checkpoint (stray folders of a killed run are ignored and then removed).
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "support/small_run.h"
#include "support/temp_dir.h"
#include "train/checkpoint/checkpoint.h"
#include "train/evaluate.h"
#include "train/report/metrics.h"
#include "train/checkpoint/safetensors.h"
#include "train/trainer.h"

using namespace tapegrad;
using testing::small_options;
using testing::TempDir;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The bytes of a tensor's elements in row-major order.
std::string tensor_bytes(const Tensor& t) {
  const Tensor c = t.contiguous();
  const size_t n = static_cast<size_t>(c.numel()) * itemsize(c.dtype());
  const char* base =
      static_cast<const char*>(c.data_ptr());
  return std::string(base, n);
}

/// Every tensor of two safetensors files has the same name, position, dtype, shape and bits.
void require_same_tensors(const std::string& a_path, const std::string& b_path) {
  const SafetensorsFile a = load_safetensors(a_path), b = load_safetensors(b_path);
  INFO(a_path << " vs " << b_path);
  REQUIRE(a.tensors.size() == b.tensors.size());
  REQUIRE(!a.tensors.empty());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [name, ta] = a.tensors[i];
    const Tensor& tb = b.tensors[i].second;
    INFO("tensor " << name);
    REQUIRE(name == b.tensors[i].first);
    REQUIRE(ta.dtype() == tb.dtype());
    REQUIRE(ta.shape() == tb.shape());
    CHECK(tensor_bytes(ta) == tensor_bytes(tb));
  }
}

/// metrics.csv rows without the two timing columns (steps_per_second, elapsed_seconds), as written.
std::vector<std::string> metrics_without_timing(const std::string& path) {
  std::istringstream in(read_file(path));
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) fields.push_back(cell);
    REQUIRE(fields.size() == 8);
    std::string row;
    for (size_t i = 0; i < 6; ++i) row += fields[i] + (i < 5 ? "," : "");
    rows.push_back(row);
  }
  return rows;
}

/// The header and one row per step that logs (every log_every), validates (every eval_every) or ends the run.
size_t expected_lines(int64_t total, int64_t eval_every, int64_t log_every) {
  size_t lines = 1;
  for (int64_t step = 1; step <= total; ++step) lines += step % eval_every == 0 || step % log_every == 0 || step == total;
  return lines;
}

json trainer_json(const std::string& dir) { return json::parse(read_file(fs::path(dir) / "trainer.json")); }

/// Runs `straight` to 2n steps, and the same options to n steps then resume to 2n, in two run
/// directories; both must end with the same weights, optimizer state, metrics and trainer state.
void require_exact_resume(TrainOptions options, int64_t n, const TempDir& dir) {
  std::ostringstream log;
  options.out = dir / "straight";
  options.steps = 2 * n;
  const TrainSummary straight = train(options, log);
  options.out = dir / "interrupted";
  options.steps = n;
  const TrainSummary first = train(options, log);
  REQUIRE(first.steps == n);
  const TrainSummary resumed = resume(options.out, ResumeOptions{.steps = 2 * n}, log);
  INFO(log.str());
  REQUIRE(straight.steps == 2 * n);
  REQUIRE(resumed.steps == 2 * n);

  const std::string a = dir / "straight", b = dir / "interrupted";
  require_same_tensors(a + "/model.safetensors", b + "/model.safetensors");
  require_same_tensors(a + "/optimizer.safetensors", b + "/optimizer.safetensors");
  require_same_tensors(a + "/best/model.safetensors", b + "/best/model.safetensors");
  const std::vector<std::string> rows_a = metrics_without_timing(a + "/metrics.csv");
  CHECK(rows_a.size() == expected_lines(2 * n, options.eval_every, options.log_every));
  CHECK(rows_a == metrics_without_timing(b + "/metrics.csv"));
  CHECK(straight.final_accuracy == resumed.final_accuracy);
  CHECK(straight.final_loss == resumed.final_loss);
  CHECK(straight.best_accuracy == resumed.best_accuracy);
  CHECK(straight.best_step == resumed.best_step);
  CHECK(straight.truncated == resumed.truncated);
  const json ta = trainer_json(a), tb = trainer_json(b);
  for (const char* key : {"step", "total_steps", "epoch", "rng", "best", "truncated", "window", "schedule"}) {
    INFO("trainer.json key " << key);
    CHECK(ta.at(key) == tb.at(key));
  }
}

}  // namespace

TEST_CASE("train: the default model learns majority to 99 percent") {
  TempDir dir("tapegrad_test_e2e");
  TrainOptions options;  // the defaults of `tapegrad train`
  options.task.name = "majority";
  options.target_acc = 0.99;
  options.steps = 1000;
  options.out = dir / "run";
  std::ostringstream log;
  const TrainSummary summary = train(options, log);
  INFO(log.str());
  CHECK(summary.reached_target);
  CHECK(summary.final_accuracy >= 0.99);
  CHECK(summary.best_accuracy >= 0.99);
  CHECK(summary.steps < 1000);
  // The float32 weights on disk reproduce the accuracy the run reported.
  LoadedModel loaded = load_model(options.out);
  const Evaluation eval =
      evaluate(*loaded.model, validation_set(options.task, options.seed), loaded.vocab, loaded.labels);
  CHECK(eval.accuracy == Approx(summary.final_accuracy).margin(1e-3));
  CHECK(eval.count == 2000);
}

TEST_CASE("checkpoints: a config.json written before the component keys loads with the built-in components") {
  TempDir dir("tapegrad_test_e2e");
  TrainOptions options = small_options(dir / "run");
  options.steps = 10;
  std::ostringstream log;
  train(options, log);
  const std::string config_path = options.out + "/config.json";
  json config = json::parse(std::ifstream(config_path));
  CHECK(config.at("norm") == "layernorm");
  CHECK(config.at("attention") == "softmax");
  CHECK(config.at("ffn") == "dense");
  const LoadedModel current = load_model(options.out);
  // As tapegrad wrote it before the norm, attention and ffn components existed: no settings object, the
  // norm's eps a top-level key.
  for (const char* key : {"norm", "attention", "ffn", "settings"}) config.erase(key);
  config["layer_norm_eps"] = 1e-5;
  std::ofstream(config_path, std::ios::trunc) << config.dump(2) << "\n";
  const LoadedModel old = load_model(options.out);
  CHECK(old.options.norm == "layernorm");
  CHECK(old.options.attention == "softmax");
  CHECK(old.options.ffn == "dense");
  CHECK(nn::chosen_settings<nn::NormKind>(old.options).real("eps") == 1e-5);
  CHECK(json::parse(model_config_json(old.options).dump()) == json::parse(model_config_json(current.options).dump()));
  const std::vector<std::vector<int64_t>> sequences = {{3, 4, 5, 3}, {6, 3}};
  CHECK(tensor_bytes(classify(*old.model, sequences, 64)) == tensor_bytes(classify(*current.model, sequences, 64)));
}

TEST_CASE("train: the default model learns order to 99 percent") {
  TempDir dir("tapegrad_test_e2e");
  TrainOptions options;
  options.task.name = "order";
  options.target_acc = 0.99;
  options.steps = 1500;
  options.out = dir / "run";
  std::ostringstream log;
  const TrainSummary summary = train(options, log);
  INFO(log.str());
  CHECK(summary.reached_target);
  CHECK(summary.final_accuracy >= 0.99);
  CHECK(summary.steps < 1500);
  LoadedModel loaded = load_model(options.out + "/best");
  CHECK(loaded.labels == std::vector<std::string>{"AB", "BA"});
  const Evaluation eval =
      evaluate(*loaded.model, validation_set(options.task, options.seed), loaded.vocab, loaded.labels);
  CHECK(eval.accuracy >= 0.99);
}

TEST_CASE("train: resume is bit-identical to an uninterrupted run on a task stream") {
  TempDir dir("tapegrad_test_e2e");
  require_exact_resume(small_options(""), 30, dir);
}

TEST_CASE("train: resume is bit-identical with a shuffled fixed training set") {
  // 100 examples in batches of 16: 7 batches per epoch, the last one of 4. Stopping after 21 steps ends
  // exactly at an epoch boundary, after 30 in the middle of the fifth epoch; both cross several epochs.
  for (const int64_t n : {21, 30}) {
    INFO("stopped after " << n << " steps");
    TempDir dir("tapegrad_test_e2e");
    TrainOptions options = small_options("");
    options.train_size = 100;
    options.shuffle = true;
    options.eval_every = n / 3;
    require_exact_resume(options, n, dir);
    CHECK(trainer_json(dir / "straight").at("epoch").get<int64_t>() >= 5);
  }
}

TEST_CASE("train: resume is bit-identical with dropout") {
  TempDir dir("tapegrad_test_e2e");
  TrainOptions options = small_options("");
  options.model.dropout = 0.1;
  require_exact_resume(options, 30, dir);
  // The dropout stream was drawn from: a run without dropout leaves it where it started.
  TrainOptions no_dropout = small_options(dir / "no_dropout");
  no_dropout.steps = 1;
  std::ostringstream log;
  train(no_dropout, log);
  CHECK(trainer_json(dir / "straight").at("rng").at("dropout") != trainer_json(no_dropout.out).at("rng").at("dropout"));
}

TEST_CASE("train: metrics.csv has a training-loss row every --log-every steps and resume neither repeats nor loses one") {
  TempDir dir("tapegrad_test_e2e");
  TrainOptions options = small_options("");
  options.eval_every = 10;
  options.log_every = 3;
  // Stops after a validation that is off the log grid (20), so that both sessions write rows of each kind.
  // (A stop at any other step validates there, which an uninterrupted run does not.)
  require_exact_resume(options, 20, dir);

  const std::vector<MetricsRow> rows = read_metrics_csv(dir / "straight/metrics.csv");
  std::vector<int64_t> steps;
  for (const MetricsRow& row : rows) {
    INFO("step " << row.step);
    steps.push_back(row.step);
    CHECK(std::isfinite(row.train_loss));
    CHECK(row.steps_per_second > 0);
    const bool validated = row.step % 10 == 0;
    CHECK(std::isfinite(row.valid_loss) == validated);
    CHECK(std::isfinite(row.valid_accuracy) == validated);
  }
  const std::vector<int64_t> expected = {3, 6, 9, 10, 12, 15, 18, 20, 21, 24, 27, 30, 33, 36, 39, 40};
  CHECK(steps == expected);
  // On disk a training-only row leaves its validation cells empty.
  std::istringstream lines(read_file(dir / "straight/metrics.csv"));
  std::string header, first;
  std::getline(lines, header);
  std::getline(lines, first);
  CHECK_THAT(first, Catch::StartsWith("3,0,") && Catch::Contains(",,"));

  // A session killed after logging rows past its last checkpoint (step 20): resume drops them and writes
  // them again, so the file ends as the uninterrupted run's.
  options.out = dir / "killed";
  options.steps = 20;
  std::ostringstream log;
  train(options, log);
  std::ofstream(fs::path(options.out) / "metrics.csv", std::ios::app) << "21,0,0.005,9.5,,,100,1\n24,0,0.005,9.5,,,100,1\n30,0,0.005,9.5,9.5,0.125,100,1\n";
  resume(options.out, ResumeOptions{.steps = 40}, log);
  CHECK(metrics_without_timing(options.out + "/metrics.csv") == metrics_without_timing(dir / "straight/metrics.csv"));
}

TEST_CASE("train: resume with a new total stretches a decaying schedule over it") {
  // A cosine run of n steps resumed to 2n cannot match a straight 2n run (its first n steps decayed
  // faster), but its added steps must follow the schedule over 2n rather than sit at min_lr.
  TempDir dir("tapegrad_test_e2e");
  std::ostringstream log;
  TrainOptions options = small_options(dir / "straight");
  options.schedule = "cosine";
  options.warmup = 5;
  options.steps = 40;
  train(options, log);
  options.out = dir / "interrupted";
  options.steps = 20;
  train(options, log);
  resume(options.out, ResumeOptions{.steps = 40}, log);
  INFO(log.str());
  const std::vector<MetricsRow> a = read_metrics_csv(dir / "straight/metrics.csv");
  const std::vector<MetricsRow> b = read_metrics_csv(dir / "interrupted/metrics.csv");
  REQUIRE(a.size() == 4);
  REQUIRE(b.size() == 4);
  for (size_t i = 2; i < 4; ++i) {
    CHECK(b[i].step == a[i].step);
    CHECK(b[i].lr == a[i].lr);
    CHECK(b[i].lr > 0);
  }
  CHECK(trainer_json(dir / "straight").at("schedule") == trainer_json(dir / "interrupted").at("schedule"));
}

TEST_CASE("train: --init starts from a checkpoint's weights and vocabulary with a fresh optimizer") {
  TempDir dir("tapegrad_test_e2e");
  std::ostringstream log;
  TrainOptions options;  // the default model, briefly trained
  options.steps = 100;
  options.out = dir / "first";
  const TrainSummary first = train(options, log);
  INFO(log.str());
  REQUIRE(first.final_accuracy > 0.8);

  {  // with a zero learning rate the weights and the accuracy are the first run's exactly
    TrainOptions second = options;
    second.init = options.out;
    second.out = dir / "second";
    second.steps = 1;
    second.eval_every = 1;
    second.lr = 0;
    second.model.d_model = 8;  // ignored: the model comes from the checkpoint
    const TrainSummary summary = train(second, log);
    CHECK(summary.final_accuracy == first.final_accuracy);
    CHECK(summary.final_loss == Approx(first.final_loss).epsilon(1e-6));
    CHECK(summary.parameters == first.parameters);
    require_same_tensors(options.out + "/model.safetensors", second.out + "/model.safetensors");
    CHECK(read_file(options.out + "/vocab.txt") == read_file(second.out + "/vocab.txt"));
    CHECK(read_file(options.out + "/labels.txt") == read_file(second.out + "/labels.txt"));
    CHECK(read_file(options.out + "/config.json") == read_file(second.out + "/config.json"));
    // A fresh optimizer: one step counted, not the first run's 100 + 1.
    const SafetensorsFile opt = load_safetensors(second.out + "/optimizer.safetensors");
    CHECK(opt.at("step").item() == 1);
  }
  {  // with the default learning rate it keeps what the first run learned
    TrainOptions third = options;
    third.init = options.out;
    third.out = dir / "third";
    third.steps = 10;
    third.eval_every = 10;
    const TrainSummary from_init = train(third, log);
    third.init.clear();  // the same 10 steps from scratch
    third.out = dir / "fresh";
    const TrainSummary fresh = train(third, log);
    // Adam's first steps from a fresh state move every weight by about lr, so the accuracy dips a little.
    CHECK(from_init.final_accuracy >= first.final_accuracy - 0.1);
    CHECK(from_init.final_accuracy > fresh.final_accuracy + 0.3);
    CHECK(load_safetensors(dir / "third/optimizer.safetensors").at("step").item() == 10);
  }
  {  // a checkpoint with other labels is refused
    TrainOptions other = options;
    other.init = options.out;
    other.out = dir / "other_labels";
    other.task.name = "order";
    CHECK_THROWS_WITH(train(other, log), Catch::Contains("labels differ"));
  }
}

TEST_CASE("train: a run directory shows one whole checkpoint and strays of a killed run go") {
  TempDir dir("tapegrad_test_e2e");
  const std::string out = dir / "run";
  std::ostringstream log;
  TrainOptions options = small_options(out);
  options.steps = 30;
  train(options, log);
  INFO(log.str());

  const char* files[] = {"model.safetensors", "config.json",           "vocab.txt",
                         "labels.txt",        "optimizer.safetensors", "trainer.json"};
  /// latest and best are symlinks into .checkpoints at complete folders, and nothing else is kept there.
  auto require_whole = [&](int64_t step) {
    std::set<std::string> live;
    for (const char* link : {"latest", "best"}) {
      INFO(link);
      REQUIRE(fs::is_symlink(fs::path(out) / link));
      const fs::path target = fs::read_symlink(fs::path(out) / link);
      CHECK(target.parent_path() == ".checkpoints");
      REQUIRE(fs::is_directory(fs::path(out) / target));
      for (const char* file : files) CHECK(fs::is_regular_file(fs::path(out) / target / file));
      live.insert(target.filename().string());
      CHECK_NOTHROW(load_model((fs::path(out) / link).string()));
    }
    std::set<std::string> kept;
    for (const auto& entry : fs::directory_iterator(fs::path(out) / ".checkpoints"))
      kept.insert(entry.path().filename().string());
    CHECK(kept == live);
    for (const char* file : files) {  // out/<file> -> latest/<file>
      CHECK(fs::is_symlink(fs::path(out) / file));
      CHECK(fs::equivalent(fs::path(out) / file, fs::path(out) / "latest" / file));
    }
    for (const auto& entry : fs::recursive_directory_iterator(out)) CHECK(entry.path().extension() != ".tmp");
    CHECK(trainer_json(out).at("step").get<int64_t>() == step);
  };
  require_whole(30);

  // A run killed while writing its next checkpoints: two half-written folders (one where the resumed
  // run will publish next), a swap of `latest` cut short, a metrics.csv.tmp, and a metrics.csv row of a
  // validation whose checkpoint never got published.
  const fs::path store = fs::path(out) / ".checkpoints";
  fs::create_directories(store / "step-000000040");
  std::ofstream(store / "step-000000040" / "model.safetensors.tmp") << "half";
  fs::create_directories(store / "step-000000999");
  std::ofstream(store / "step-000000999" / "config.json") << "{\"vocab_size\": ";
  fs::create_directory_symlink(".checkpoints/step-000000999", fs::path(out) / "latest.tmp");
  std::ofstream(fs::path(out) / "metrics.csv.tmp") << "step,epo";
  std::ofstream(fs::path(out) / "metrics.csv", std::ios::app) << "40,0,0.005,1.5,1.5,0.125,100,1\n";

  // What users open still shows the last whole checkpoint.
  const LoadedModel before = load_model(out);
  CHECK(before.labels.size() == 6);
  CHECK(trainer_json(out).at("step").get<int64_t>() == 30);

  // The next publish removes every stray.
  resume(out, ResumeOptions{.steps = 50}, log);
  CHECK(!fs::exists(store / "step-000000999"));
  CHECK(!fs::exists(fs::path(out) / "latest.tmp"));
  CHECK(!fs::exists(fs::path(out) / "metrics.csv.tmp"));
  require_whole(50);
  const std::vector<MetricsRow> rows = read_metrics_csv(out + "/metrics.csv");
  REQUIRE(rows.size() == 5);
  CHECK(rows[3].step == 40);
  CHECK(rows[3].valid_accuracy != 0.125);  // the row of the unpublished step was dropped and redone

  // A further run into the same directory is refused unless asked to overwrite it; then it starts over
  // and keeps only its own checkpoints.
  options.steps = 20;
  CHECK_THROWS_WITH(train(options, log), Catch::Contains("already holds a training run") && Catch::Contains("--overwrite"));
  require_whole(50);
  options.overwrite = true;
  train(options, log);
  require_whole(20);
  CHECK(metrics_without_timing(out + "/metrics.csv").size() == 1 + 2);
}

TEST_CASE("train: --activation-checkpointing on trains to the same bits as off (3 layers, dropout)") {
  TempDir dir("tapegrad_test_checkpointing");
  std::ostringstream log;
  TrainOptions options = testing::small_options("");
  options.model.n_layers = 3;
  options.model.dropout = 0.1;
  options.steps = 12;
  for (const char* mode : {"on", "off"}) {
    options.activation_checkpointing = mode;
    options.out = dir / mode;
    train(options, log);
  }
  require_same_tensors(dir / "on/model.safetensors", dir / "off/model.safetensors");
  require_same_tensors(dir / "on/optimizer.safetensors", dir / "off/optimizer.safetensors");
  options.activation_checkpointing = "sometimes";
  CHECK_THROWS_WITH(validate(options), Catch::Contains("activation_checkpointing must be auto, on or off, got 'sometimes'"));
}
