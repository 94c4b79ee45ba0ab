// Model settings that cannot learn are refused by flag name before any work: a combination a component cannot
// serve (each variant declares its refusals with it, nn/components.h), a model blind to its input; what --init
// lets a fine-tuning run change; and the size of a built-in task's validation set. Each row of the tables is a
// row of docs/reliability.md (the last test checks that the page lists them).
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "nn/classifier.h"
#include "support/bad_input.h"
#include "support/small_run.h"
#include "support/temp_dir.h"
#include "train/train_options.h"
#include "train/training_stream.h"

using namespace tapegrad;
using testing::TempDir;
using namespace testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// Combinations that would build a model that cannot learn, or that a component cannot compute.
std::vector<BadInput> cannot_serve() {
  return {
      {"--causal with --pool cls", "--task order --causal --pool cls", "--pool cls with --causal: under the causal mask"},
      {"--pool cls with no layers", "--layers 0 --pool cls", "--pool cls with --layers 0: with no encoder layer"},
      {"--pool cls with a context of one", "--context-length 1 --pool cls",
       "--pool cls with --context-length 1: leaves no position for the text"},
      {"--attention linear with --positional rope", "--attention linear --positional rope",
       "--attention linear with --positional rope: linear attention forms no (T, T) scores"},
      {"--attention linear with --positional alibi", "--attention linear --positional alibi",
       "--attention linear with --positional alibi"},
      {"--attention linear with a temperature", "--attention linear --temperature 2",
       "--temperature applies to --attention softmax only, not --attention linear"},
      {"--positional rope with an odd head width", "--positional rope --d-model 6 --heads 2",
       "--positional rope with --d-model 6 and --heads 2: each head's width"},
      {"--top-k above --experts", "--ffn moe --experts 2 --top-k 3", "--top-k 3 is outside [1, --experts 2]"},
      {"a temperature that makes every softmax one-hot", "--temperature 1e-4",
       "--temperature must be a finite number in [0.001, 1000], got 0.0001"},
      {"--causal with no layers", "--layers 0 --causal", "--causal configures the encoder layers, and --layers 0"},
      {"--attention linear with no layers", "--layers 0 --attention linear", "--attention configures the encoder layers"},
      {"--positional rope with no layers", "--layers 0 --positional rope",
       "--positional rope acts inside attention, and --layers 0 builds no attention"},
  };
}

}  // namespace

TEST_CASE("model settings: every combination a component cannot serve is refused by flag name before any work") {
  TempDir dir("tapegrad_test_model_settings");
  // A run that --overwrite would replace: a refused combination must leave it exactly as it was.
  const Result first = run_cli(dir, "train --steps 20 --eval-every 10 --out " + quote(dir / "run"));
  REQUIRE(first.exit_code == 0);
  const auto before = folder_contents(dir / "run");
  for (const BadInput& c : cannot_serve()) {
    INFO(c.name);
    require_one_line_error(run_cli(dir, "train " + c.args + " --steps 5 --out " + quote(dir / "new")), c.mentions);
    CHECK(!fs::exists(dir / "new"));  // not even the folder or its lock
    require_one_line_error(run_cli(dir, "train " + c.args + " --steps 5 --overwrite --out " + quote(dir / "run")),
                           c.mentions);
    CHECK(folder_contents(dir / "run") == before);
  }
}

TEST_CASE("model settings: the library names the same refusals by field, and a config.json with one is refused") {
  nn::ClassifierOptions o = nn::micro_classifier();
  o.pool = "cls";
  o.settings.set("attention", "causal", true);
  CHECK_THROWS_WITH(nn::validate(o),
                    Catch::StartsWith("SequenceClassifier: pool = cls with attention.causal: under the causal"));
  o.settings.erase("attention", "causal");
  o.attention = "linear";
  o.positional = "rope";
  CHECK_THROWS_WITH(nn::validate(o, "config.json"),
                    Catch::StartsWith("config.json: attention = linear with positional = rope: "));
  TrainOptions t = testing::small_options("unused");
  t.model.attention = "linear";
  t.model.positional = "alibi";
  CHECK_THROWS_WITH(validate(t), Catch::StartsWith("TrainOptions.model.attention = linear with "
                                                   "TrainOptions.model.positional = alibi: "));
}

TEST_CASE("model settings: --init fine-tunes with its own --dropout and --moe-aux-weight, recorded in config.json") {
  TempDir dir("tapegrad_test_model_settings");
  REQUIRE(run_cli(dir, "train --ffn moe --steps 20 --eval-every 10 --out " + quote(dir / "base")).exit_code == 0);
  const Result tuned = run_cli(dir, "train --init " + quote(dir / "base/best") +
                                        " --dropout 0.2 --moe-aux-weight 0.05 --steps 10 --out " + quote(dir / "tuned"));
  INFO(tuned.err);
  REQUIRE(tuned.exit_code == 0);
  const json config = json::parse(read_file(dir / "tuned/config.json"));
  CHECK(config.at("dropout") == 0.2);
  CHECK(config.at("settings").at("ffn").at("aux_weight") == 0.05);
  CHECK(config.at("ffn") == "moe");  // the rest is the checkpoint's
  // Its range, by flag, against the checkpoint's moe block; and the refusal leaves nothing behind.
  require_one_line_error(run_cli(dir, "train --init " + quote(dir / "base/best") + " --moe-aux-weight nan --steps 10 --out " +
                                          quote(dir / "refused")),
                         "--moe-aux-weight must be a finite number in [0, 100], got nan");
  CHECK(!fs::exists(dir / "refused"));
  const json base = json::parse(read_file(dir / "base/config.json"));
  CHECK(base.at("dropout") == 0.0);
  // Without the flags: the defaults of any run, not the checkpoint's
  REQUIRE(run_cli(dir, "train --init " + quote(dir / "tuned") + " --steps 10 --out " + quote(dir / "again")).exit_code == 0);
  CHECK(json::parse(read_file(dir / "again/config.json")).at("dropout") == 0.0);
  CHECK(json::parse(read_file(dir / "again/config.json")).at("settings").at("ffn").at("aux_weight") == 0.01);
}

TEST_CASE("model settings: --valid-size sets a built-in task's validation set, and trainer.json without it reads 2000") {
  TrainOptions o = testing::small_options("unused");
  o.valid_size = 37;
  CHECK(load_training_data(o, nullptr).valid.size() == 37);
  o.valid_size = 0;
  CHECK_THROWS_WITH(validate(o), Catch::Contains("TrainOptions.valid_size must be in [1, "));
  TrainOptions trained = testing::small_options("unused");
  trained.model.vocab_size = 9;  // as the data filled them in
  trained.model.num_classes = 6;
  trained.model.context_length = trained.context_length = 12;
  json saved = to_json(trained);
  saved.erase("valid_size");  // a run from before the flag
  CHECK(train_options_from_json(saved, "trainer.json").valid_size == 2000);
  TempDir dir("tapegrad_test_model_settings");
  require_one_line_error(run_cli(dir, "train --data x.tsv --valid-size 10 --out " + quote(dir / "o")),
                         "--valid-size configures a built-in task");
  require_one_line_error(run_cli(dir, "train --valid-size 0 --out " + quote(dir / "o")), "--valid-size");
  // eval validates on the task as trained: the same number of examples, unless --valid-size says otherwise
  REQUIRE(run_cli(dir, "train --valid-size 50 --steps 10 --out " + quote(dir / "run")).exit_code == 0);
  const auto examples = [&](const std::string& flags) {
    const Result r = run_cli(dir, "eval --checkpoint " + quote(dir / "run") + " --task majority --json" + flags);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return json::parse(r.out).at("examples").get<int64_t>();
  };
  CHECK(examples("") == 50);
  CHECK(examples(" --valid-size 70") == 70);
  require_one_line_error(run_cli(dir, "eval --checkpoint " + quote(dir / "run") + " --task majority --valid-size 0"),
                         "--valid-size must be in [1, ");
  require_one_line_error(run_cli(dir, "eval --checkpoint " + quote(dir / "run") + " --data x.tsv --valid-size 9"),
                         "--valid-size configures a built-in task");
}

TEST_CASE("model settings: docs/reliability.md lists every row of this file") {
  require_documented(cannot_serve());
}
