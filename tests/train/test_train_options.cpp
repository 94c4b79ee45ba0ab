// validate(TrainOptions): the library names what is wrong by TrainOptions field, never by a command-line
// flag (a program that calls train() has no flags); the command line passes its own names for the same
// rules (tests/train/test_bad_inputs.cpp and test_cli.cpp check those).
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <string>

#include "autograd/error.h"
#include "train/train_options.h"

using namespace tapegrad;

namespace {

struct BadOption {
  std::string name;
  std::function<void(TrainOptions&)> change;
  std::string message;  // what validate() must say
};

}  // namespace

TEST_CASE("train options: validate names the TrainOptions field, the rule and the value") {
  const BadOption cases[] = {
      {"NaN learning rate", [](TrainOptions& o) { o.lr = std::nan(""); }, "TrainOptions.lr must be a finite number >= 0, got nan"},
      {"dropout of 1", [](TrainOptions& o) { o.model.dropout = 1; }, "TrainOptions.model.dropout must be in [0, 1), got 1"},
      {"zero log interval", [](TrainOptions& o) { o.log_every = 0; }, "TrainOptions.log_every must be positive, got 0"},
      {"zero heads", [](TrainOptions& o) { o.model.n_heads = 0; },
       "TrainOptions.model.n_heads must be in [1, TrainOptions.model.d_model = 32], got 0"},
      {"width not divisible by heads", [](TrainOptions& o) { o.model.n_heads = 3; },
       "TrainOptions.model.d_model 32 is not divisible by TrainOptions.model.n_heads 3: each head gets d_model / heads "
       "dimensions"},
      {"steps and epochs", [](TrainOptions& o) { o.steps = o.epochs = 2; },
       "give TrainOptions.steps or TrainOptions.epochs, not both"},
      {"epochs of a fresh task stream", [](TrainOptions& o) { o.epochs = 2; },
       "TrainOptions.epochs needs a fixed training set: give TrainOptions.data or TrainOptions.train_size"},
      {"validation fraction of 1", [](TrainOptions& o) { o.data = "x.tsv", o.valid_fraction = 1; },
       "TrainOptions.valid_fraction must be in (0, 1) (the share of TrainOptions.data held out), got 1"},
      {"unknown optimizer", [](TrainOptions& o) { o.optimizer = "lion"; },
       // sign-sgd: this test program's own optimizer (tests/train/test_registries.cpp), listed as a user's is
       "TrainOptions.optimizer: unknown optimizer 'lion' (registered: adam, adamw, sgd or sign-sgd)"},
  };
  for (const BadOption& c : cases) {
    INFO(c.name);
    TrainOptions options;
    REQUIRE_NOTHROW(validate(options));  // only the change is wrong
    c.change(options);
    CHECK_THROWS_WITH(validate(options), c.message);
  }
}

TEST_CASE("train options: validate names options as the caller does") {
  TrainOptions options;
  options.model.d_ff = 0;
  const OptionNames shout = [](std::string_view field) { return cat("<", field, ">"); };
  CHECK_THROWS_WITH(validate(options, shout), Catch::StartsWith("<model.d_ff> must be in [1, "));
}
