// trainer.json is read as hostile, like every file of a run folder: each of its counters, times, losses and
// RNG states inside the range a run writes, its format this version's, its model options the ones its data
// and other options make, and no key a run does not write. An edited value is refused by its key before the
// run resumes, for either model kind; the untouched file resumes.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/cli.h"
#include "support/temp_dir.h"

using namespace tapegrad;
using namespace testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// A finished run of each kind: a classifier on a fixed training set (its data stream has an epoch and a
/// cursor) and a character language model.
std::vector<std::string> finished_runs(const TempDir& dir) {
  const std::string text = dir.file("text.txt", [] {
    std::string t;
    for (int i = 0; i < 300; ++i) t += "the cat sat on the mat. ";
    return t;
  }());
  const std::string classifier = dir / "classifier", lm = dir / "lm";
  const std::string small = " --d-model 16 --heads 2 --ff 32 --layers 1 --steps 6 --eval-every 3 ";
  REQUIRE(run_cli(dir, cat("train --train-size 40 --batch-size 16", small, "--out ", quote(classifier))).exit_code == 0);
  REQUIRE(run_cli(dir, cat("train --task lm --data ", quote(text), " --context-length 8", small, "--out ", quote(lm)))
              .exit_code == 0);
  return {classifier, lm};
}

/// Every number of trainer.json outside its options and schedule (which have tests of their own), by the
/// path of keys a message names it by: "best.step", "rng.data.windows.words".
void each_number(const json& value, const std::string& path, const std::function<void(const std::string&)>& visit) {
  if (value.is_object()) {
    for (const auto& [key, child] : value.items())
      if (path.empty() && (key == "options" || key == "schedule")) continue;
      else each_number(child, path.empty() ? key : path + "." + key, visit);
  } else if (value.is_array()) {
    for (const json& element : value)
      if (element.is_number()) return visit(path);  // an RNG state's words: one key for all four
  } else if (value.is_number()) {
    visit(path);
  }
}

json& at_path(json& state, const std::string& path) {
  json* node = &state;
  for (size_t start = 0;;) {
    const size_t dot = path.find('.', start);
    node = &node->at(path.substr(start, dot - start));
    if (dot == std::string::npos) return *node;
    start = dot + 1;
  }
}

/// The run's trainer.json with `edit` applied, as --resume then sees it; restores the original after `check`.
void with_edited_state(const std::string& run, const std::function<void(json&)>& edit, const std::function<void()>& check) {
  const std::string path = fs::canonical(run + "/trainer.json").string(), original = read_file(path);
  json state = json::parse(original);
  edit(state);
  fs::remove(path);
  std::ofstream(path) << state.dump();
  check();
  fs::remove(path);
  std::ofstream(path) << original;
}

void require_refused(const TempDir& dir, const std::string& run, const std::string& mentions) {
  const std::string before = read_file(run + "/metrics.csv");
  require_one_line_error(run_cli(dir, cat("train --resume ", quote(run), " --steps 9")), "trainer.json: " + mentions);
  CHECK(read_file(run + "/metrics.csv") == before);  // nothing trained, nothing published
}

}  // namespace

TEST_CASE("trainer state: every number of trainer.json refuses a negative value by its key, for every model kind") {
  TempDir dir("tapegrad_test_trainer_state");
  for (const std::string& run : finished_runs(dir)) {
    const json saved = json::parse(read_file(run + "/trainer.json"));
    int numbers = 0;
    each_number(saved, "", [&](const std::string& path) {
      if (path.ends_with("spare_normal")) return;  // a normal deviate: any finite value is a state
      ++numbers;
      // No counter, time, loss or generator word is negative; best.accuracy's -1 means "none yet".
      const json negative = path == "best.accuracy" ? json(-0.5) : json(-2);
      INFO(run << ": " << path << " = " << negative.dump());
      with_edited_state(run, [&](json& s) {
        json& field = at_path(s, path);
        if (field.is_array()) field[0] = negative;
        else field = negative;
      }, [&] { require_refused(dir, run, "'" + path + "'"); });
    });
    CHECK(numbers >= 14);  // the walk found the fields (a renamed key would otherwise pass vacuously)
  }
}

TEST_CASE("trainer state: values a run cannot write are refused by key, and the untouched file resumes") {
  TempDir dir("tapegrad_test_trainer_state");
  const std::vector<std::string> runs = finished_runs(dir);
  const std::string classifier = runs[0], lm = runs[1];
  struct Edit {
    std::string run, path;
    json value;
    std::string mentions;
  };
  const Edit edits[] = {
      {lm, "format", "tapegrad-trainer-9", "'format' is \"tapegrad-trainer-9\", not \"tapegrad-trainer-1\""},
      {lm, "step", int64_t{1} << 60, "'step' is 1152921504606846976, outside [0, 9007199254740992]"},
      {lm, "total_steps", 0, "'total_steps' is 0, outside [6, "},
      {lm, "best.step", 7, "'best.step' is 7, outside [0, 6]"},
      {lm, "window.steps", 7, "'window.steps' is 7, outside [0, 6]"},
      {lm, "elapsed_seconds", 1e300, "'elapsed_seconds' is 1e+300, outside [0, 1e+10]"},
      {lm, "timing.train_seconds", 1e300, "'timing.train_seconds' is 1e+300"},
      {lm, "rng.dropout.words", json::array({0, 0, 0, 0}), "'rng.dropout.words' are all 0"},
      {lm, "rng.dropout.words", json::array({1, 2, 3}), "'rng.dropout.words' must be an array of 4 elements"},
      {lm, "options.model.vocab_size", 5, "'options.model.vocab_size' is 5, but the run's other options and its data make it"},
      {lm, "options.context_length", 4, "'options.model.context_length' is 8, but the run's other options and its data make it 4"},
      // Options the run's kind never reads: kept as the defaults their refused flags leave.
      {lm, "options.vocab_size", 100,
       "the saved options are invalid: 'options.vocab_size' applies to 'options.tokenizer' bpe only, not characters"},
      {lm, "options.shuffle", false,
       "the saved options are invalid: 'options.shuffle' configures a classifier's epochs, not 'options.task.name' lm"},
      {classifier, "options.tokenizer", "words",
       "the saved options are invalid: 'options.tokenizer' applies to 'options.task.name' lm only"},
      {classifier, "options.tie_embeddings", true,
       "the saved options are invalid: 'options.tie_embeddings' applies to 'options.task.name' lm only"},
      {classifier, "rng.data.cursor", 41, "'rng.data.cursor' is 41, outside [0, 40]"},
      {classifier, "options.model.num_classes", 3, "'options.model.num_classes' is 3"},
      {classifier, "options.optimizer", "adam\nw",
       "the saved options are invalid: 'options.optimizer': unknown optimizer 'adam\\nw'"},
  };
  for (const Edit& e : edits) {
    INFO(e.run << ": " << e.path << " = " << e.value.dump());
    with_edited_state(e.run, [&](json& s) { at_path(s, e.path) = e.value; }, [&] { require_refused(dir, e.run, e.mentions); });
  }
  for (const std::string& run : runs) {
    with_edited_state(run, [](json& s) { s["comment"] = "edited"; },
                      [&] { require_refused(dir, run, "unknown key \"comment\""); });
    const Result resumed = run_cli(dir, cat("train --resume ", quote(run), " --steps 9"));
    INFO(resumed.err);
    CHECK(resumed.exit_code == 0);
  }
}

TEST_CASE("trainer state: a number beyond a double is refused by its key, in trainer.json and config.json alike") {
  TempDir dir("tapegrad_test_trainer_state");
  const std::string lm = finished_runs(dir)[1];
  const std::string state_path = fs::canonical(lm + "/trainer.json").string(), state = read_file(state_path);
  const size_t at = state.find(':', state.find("\"train_seconds\""));  // the literal written in place of its value
  REQUIRE(at != std::string::npos);
  fs::remove(state_path);
  std::ofstream(state_path) << state.substr(0, at + 1) << "1e400" << state.substr(state.find_first_of(",}", at));
  require_one_line_error(run_cli(dir, cat("train --resume ", quote(lm), " --steps 9")),
                         "trainer.json: 'timing.train_seconds': number overflow parsing '1e400'");

  const std::string config_path = fs::canonical(lm + "/config.json").string();
  json config = json::parse(read_file(config_path));
  config.at("settings").at("norm")["eps"] = 12345;
  std::string text = config.dump();
  text.replace(text.find("12345"), 5, "-1e999");
  fs::remove(config_path);
  std::ofstream(config_path) << text;
  require_one_line_error(run_cli(dir, cat("generate --checkpoint ", quote(lm), " --prompt the --max-new-tokens 2")),
                         "config.json: 'settings.norm.eps': number overflow parsing '-1e999'");
}
