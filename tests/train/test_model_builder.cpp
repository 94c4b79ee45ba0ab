// train() and resume() with a model a program builds itself (ModelBuilder): what the builder chose is what
// the checkpoints record and what resume, eval and predict rebuild, and a model that disagrees with the
// data is refused before anything is written.
#include <catch2/catch.hpp>
#include <filesystem>
#include <sstream>

#include "support/cli.h"
#include "support/small_run.h"
#include "support/temp_dir.h"
#include "train/checkpoint/checkpoint.h"
#include "train/trainer.h"

using namespace tapegrad;
using testing::read_file;
using testing::small_options;
using testing::TempDir;
namespace fs = std::filesystem;
using nlohmann::json;

TEST_CASE("model builder: the built model's options are what the checkpoints say, and resume rebuilds through it") {
  TempDir dir("tapegrad_test_builder");
  int calls = 0;
  std::vector<nn::ClassifierOptions> given;
  const ModelBuilder pre_ln = [&](const nn::ClassifierOptions& options, Generator& init, std::shared_ptr<Generator> dropout_rng) {
    ++calls;
    given.push_back(options);
    nn::ClassifierOptions chosen = options;
    chosen.norm_first = true;
    return std::make_unique<nn::SequenceClassifier>(chosen, init, std::move(dropout_rng));
  };
  TrainOptions options = small_options(dir / "straight");
  REQUIRE(!options.model.norm_first);  // else the builder would choose nothing
  options.steps = 40;
  std::ostringstream log;
  train(options, log, pre_ln);
  REQUIRE(calls == 1);
  CHECK(given[0].num_classes > 0);  // the data filled these in before the builder was called
  CHECK(given[0].vocab_size > 0);
  CHECK(given[0].context_length == 12);

  const std::string straight = options.out;
  CHECK(json::parse(read_file(straight + "/config.json")).at("norm_first") == true);
  CHECK(json::parse(read_file(straight + "/trainer.json")).at("options").at("model").at("norm_first") == true);
  CHECK(load_model(straight).options.norm_first);  // what eval and predict rebuild

  // Half the steps, then resume through the same builder: the same weights as the straight run.
  options.out = dir / "resumed";
  options.steps = 20;
  train(options, log, pre_ln);
  resume(options.out, ResumeOptions{.steps = 40}, log, pre_ln);
  INFO(log.str());
  REQUIRE(calls == 3);
  CHECK(given[2].norm_first);  // resume hands the builder the saved (built) options
  CHECK(read_file(options.out + "/model.safetensors") == read_file(straight + "/model.safetensors"));
}

TEST_CASE("model builder: a model that disagrees with the data is refused, naming both numbers") {
  TempDir dir("tapegrad_test_builder");
  for (const std::string field : {"vocab_size", "num_classes", "context_length"}) {
    INFO(field);
    int64_t needed = 0, built = 0;
    const ModelBuilder wrong = [&](const nn::ClassifierOptions& options, Generator& init, std::shared_ptr<Generator> dropout_rng) {
      nn::ClassifierOptions chosen = options;
      int64_t& value = field == "vocab_size" ? chosen.vocab_size : field == "num_classes" ? chosen.num_classes : chosen.context_length;
      needed = value;
      built = value += 3;
      return std::make_unique<nn::SequenceClassifier>(chosen, init, std::move(dropout_rng));
    };
    std::ostringstream log;
    CHECK_THROWS_WITH(train(small_options(dir / "run"), log, wrong),
                      Catch::Contains(cat("built a model with ", field, " = ", built)) &&
                          Catch::Contains(cat("the data needs ", field, " = ", needed)));
    CHECK(needed > 0);
    CHECK(!fs::exists(dir / "run"));  // refused before the run directory was made
  }
  std::ostringstream log;
  const ModelBuilder none = [](const nn::ClassifierOptions&, Generator&, std::shared_ptr<Generator>) {
    return std::unique_ptr<nn::SequenceClassifier>();
  };
  CHECK_THROWS_WITH(train(small_options(dir / "run"), log, none), Catch::Contains("returned no model"));
}
