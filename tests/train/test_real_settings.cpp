// Every real-valued setting is finite in float32, in which models compute, and inside the range declared
// with it (nn/settings.h): by flag, by config.json key and by trainer.json field alike. The tests walk the
// registry of declared settings, so a setting added later is covered without a new row.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "autograd/dtype.h"
#include "nn/classifier.h"
#include "nn/components.h"
#include "support/cli.h"
#include "support/small_run.h"
#include "support/temp_dir.h"
#include "train/checkpoint/model_config.h"
#include "train/train_options.h"

using namespace tapegrad;
using namespace testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// Values a declared real setting must refuse: just outside each end (the end itself when open), one that
/// float32 cannot hold at all, and a tiny magnitude that it holds as 0 where the range admits small ones.
std::vector<double> refused_values(const nn::SettingSpec& spec) {
  std::vector<double> values = {spec.min_open ? spec.min : spec.min - std::max(1e-3, std::fabs(spec.min) / 2),
                                spec.max_open ? spec.max : spec.max + std::max(1e-3, std::fabs(spec.max)), 1e300};
  if (spec.min <= 0 && spec.max > 0) values.push_back(1e-45);
  return values;
}

std::vector<nn::DeclaredSetting> declared_reals() {
  std::vector<nn::DeclaredSetting> reals;
  for (const nn::DeclaredSetting& d : nn::declared_settings())
    if (d.spec.type == nn::SettingType::real) reals.push_back(d);
  return reals;
}

}  // namespace

TEST_CASE("real settings: every declared real setting has a range whose ends float32 holds") {
  const std::vector<nn::DeclaredSetting> reals = declared_reals();
  REQUIRE(reals.size() >= 4);  // norm eps, attention temperature and eps, moe's aux weight
  for (const nn::DeclaredSetting& d : reals) {
    INFO(d.kind << "." << d.spec.name << " " << nn::range_text(d.spec));
    CHECK(float32_holds(d.spec.min));
    CHECK(float32_holds(d.spec.max));
  }
}

TEST_CASE("real settings: every declared real setting is refused outside its range or float32 by config.json key") {
  for (const nn::DeclaredSetting& d : declared_reals()) {
    for (double value : refused_values(d.spec)) {
      INFO(d.kind << "." << d.spec.name << " = " << value);
      json config = model_config_json(nn::micro_classifier());
      config[d.kind] = d.variants.front();
      config["settings"][d.kind] = json::object({{d.spec.name, value}});  // the other variant's settings dropped
      CHECK_THROWS_WITH(model_options_from_json(config, "run/config.json"),
                        Catch::StartsWith("run/config.json") && Catch::Contains(d.kind + "." + d.spec.name));
    }
  }
  json config = model_config_json(nn::micro_classifier());  // the one real that is a field, not a setting
  config["dropout"] = 1e-45;
  CHECK_THROWS_WITH(model_options_from_json(config, "run/config.json"),
                    Catch::Contains("dropout = 1e-45 is 0 or a denormal in float32"));
}

TEST_CASE("real settings: every declared real setting is refused outside its range or float32 by its flag, before any work") {
  TempDir dir("tapegrad_test_real_settings");
  for (const nn::DeclaredSetting& d : declared_reals()) {
    for (double value : refused_values(d.spec)) {
      const std::string args =
          cat("train --", d.kind, " ", d.variants.front(), " ", d.spec.flag, " ", value, " --steps 2 --out ", quote(dir / "run"));
      INFO(args);
      require_one_line_error(run_cli(dir, args), d.spec.flag);
      CHECK(!fs::exists(dir / "run"));
    }
  }
}

TEST_CASE("real settings: trainer.json's real fields are refused where float32 cannot hold them") {
  const char* const fields[] = {"lr", "weight_decay", "clip_grad", "momentum", "target_acc"};
  for (const char* field : fields) {
    for (double value : {1e300, 1e-45}) {
      if (value > 1 && (std::string(field) == "momentum" || std::string(field) == "target_acc")) continue;  // their range
      INFO(field << " = " << value);
      TrainOptions o = small_options("unused");
      o.model.vocab_size = 9;  // as the data filled them in
      o.model.num_classes = 6;
      o.model.context_length = o.context_length = 12;
      json saved = to_json(o);
      saved[field] = value;
      CHECK_THROWS_WITH(validate(train_options_from_json(saved, "run/trainer.json")),
                        Catch::Contains(field) && Catch::Contains("float32"));
    }
  }
}

TEST_CASE("real settings: trainer.json's learning-rate schedule is the one its options make, or --resume refuses it") {
  TempDir dir("tapegrad_test_real_settings");
  const std::string run = dir / "run";
  REQUIRE(run_cli(dir, cat("train --steps 4 --eval-every 2 --schedule cosine --warmup 1 --out ", quote(run))).exit_code == 0);
  const std::string path = fs::canonical(run + "/trainer.json").string(), original = read_file(path);
  const std::pair<const char*, json> edits[] = {
      {"base_lr", -1.0}, {"base_lr", 1e300}, {"min_lr", -1.0}, {"min_lr", 1.0},
      {"warmup_steps", 0}, {"kind", "linear"}, {"total_steps", 1}};
  for (const auto& [key, value] : edits) {
    INFO("schedule." << key << " = " << value.dump());
    json state = json::parse(original);
    state.at("schedule")[key] = value;
    fs::remove(path);
    std::ofstream(path) << state.dump();
    require_one_line_error(run_cli(dir, cat("train --resume ", quote(run), " --steps 6")),
                           cat("trainer.json: 'schedule.", key, "' is ", value.dump()));
  }
  fs::remove(path);
  std::ofstream(path) << original;
  const Result resumed = run_cli(dir, cat("train --resume ", quote(run), " --steps 6"));  // as saved: it goes on
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
}
