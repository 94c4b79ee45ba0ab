// Choosing by name: a task and an optimizer registered from outside the library, exactly as a user's program
// registers them, train through train() by name; unknown names are refused with the registered ones listed
// (these included). The registrations below run when this test program loads, so every test of the program
// sees them, as every part of a user's program would.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "autograd/dtype.h"
#include "optim/optimizer.h"
#include "support/cli.h"
#include "support/small_run.h"
#include "support/temp_dir.h"
#include "train/trainer.h"

using namespace tapegrad;
using testing::TempDir;

namespace {

int64_t sign_sgd_updates = 0;  // updates the user's optimizer made, all runs together

/// signSGD (Bernstein et al. 2018): p −= lr·sign(g). No state.
class SignSgd : public optim::Optimizer {
 public:
  SignSgd(optim::NamedParameters params, double lr) : Optimizer("SignSGD", std::move(params), lr) {}

 protected:
  void update(size_t i, const Tensor& grad) override {
    const Tensor& p = param(i);
    dispatch_float(p.dtype(), "SignSGD step", [&](auto tag) {
      using T = decltype(tag);
      T* w = p.data<T>();
      const T* g = grad.data<T>();
      const T lr = static_cast<T>(this->lr());
      for (int64_t k = 0; k < p.numel(); ++k) w[k] -= lr * static_cast<T>((g[k] > 0) - (g[k] < 0));
    });
    ++sign_sgd_updates;
  }
};

const bool optimizer_registered = optim::register_optimizer({
    .name = "sign-sgd",
    .help = "p -= lr * sign(g)",
    .make = [](optim::NamedParameters params, const optim::Hyperparameters& h) -> std::unique_ptr<optim::Optimizer> {
      return std::make_unique<SignSgd>(std::move(params), h.lr);
    },
});

/// "first-word": the label is the first of L words drawn uniformly from t0..t{V-1}. Draws: L, then each word.
const bool task_registered = register_task({
    .name = "first-word",
    .help = "the first of the words t0..t{V-1}; V classes",
    .next =
        [](const TaskOptions& o, Generator& gen) {
          const int64_t L = draw_length(gen, o.min_len, o.max_len);
          std::string text, first;
          for (int64_t i = 0; i < L; ++i) {
            const std::string word = symbol_word(static_cast<int64_t>(gen.below(static_cast<uint64_t>(o.symbols))));
            if (i == 0) first = word;
            text += (i ? " " : "") + word;
          }
          return Example{first, text};
        },
    .labels =
        [](const TaskOptions& o) {
          std::vector<std::string> out;
          for (int64_t i = 0; i < o.symbols; ++i) out.push_back(symbol_word(i));
          return out;
        },
    .words =
        [](const TaskOptions& o) {
          std::vector<std::string> out;
          for (int64_t i = 0; i < o.symbols; ++i) out.push_back(symbol_word(i));
          return out;
        },
    .validate =
        [](const TaskOptions& o, const TaskFieldNames& name) {
          if (o.symbols > 100) throw ValueError(cat("task first-word: ", name("symbols"), " must be <= 100"));
        },
});

}  // namespace

TEST_CASE("registries: a task and an optimizer registered outside the library train through train() by name") {
  REQUIRE(optimizer_registered);
  REQUIRE(task_registered);
  TempDir dir("tapegrad_test_registries");
  TrainOptions o = testing::small_options(dir / "run");
  o.task.name = "first-word";
  o.optimizer = "sign-sgd";
  o.lr = 3e-3;
  o.steps = 120;
  o.eval_every = 60;
  const int64_t updates_before = sign_sgd_updates;
  std::ostringstream log;
  const TrainSummary summary = train(o, log);
  INFO(log.str());
  CHECK(summary.steps == 120);
  CHECK(sign_sgd_updates > updates_before);  // the user's rule made the updates
  // The task's labels are the model's classes, and it learns it: chance is 1/6.
  CHECK(testing::read_file(dir / "run/labels.txt") == "t0\nt1\nt2\nt3\nt4\nt5\n");
  CHECK(summary.best_accuracy > 0.5);
}

TEST_CASE("registries: the user's task is deterministic per seed and checked by its own rule") {
  TaskStream a({"first-word", 6, 2, 5}, 9), b({"first-word", 6, 2, 5}, 9);
  CHECK(a.take(20) == b.take(20));
  CHECK(a.labels().size() == 6);
  CHECK_THROWS_WITH(validate_task({"first-word", 101, 2, 5}), Catch::Matchers::Equals("task first-word: TaskOptions.symbols must be <= 100"));
}

TEST_CASE("registries: unknown names are refused with every registered one listed, the user's included") {
  TrainOptions o = testing::small_options("unused");
  o.optimizer = "lion";
  CHECK_THROWS_WITH(validate(o), Catch::Matchers::Equals(
                                     "TrainOptions.optimizer: unknown optimizer 'lion' (registered: adam, adamw, sgd or sign-sgd)"));
  o = testing::small_options("unused");
  o.task.name = "sorting";
  CHECK_THROWS_WITH(validate(o), Catch::Matchers::Equals(
                                     "TrainOptions.task.name: unknown task 'sorting' (registered: majority, order or first-word)"));
  o = testing::small_options("unused");
  o.schedule = "step";
  CHECK_THROWS_WITH(validate(o), Catch::Matchers::Equals(
                                     "TrainOptions.schedule: unknown learning-rate schedule 'step' (registered: constant, cosine or linear)"));
  // A name read from a file is shown escaped, so the message stays one line and shows the bytes it held.
  o = testing::small_options("unused");
  o.optimizer = "adam\nw\x1b";
  CHECK_THROWS_WITH(validate(o), Catch::Matchers::StartsWith("TrainOptions.optimizer: unknown optimizer 'adam\\nw\\x1b' (registered:"));
  // A second registration under a taken name, or one lacking what it needs, is refused and adds nothing.
  CHECK_THROWS_WITH(optim::register_optimizer({.name = "sgd", .make = optim::optimizers().at("sgd").make}),
                    Catch::Matchers::Equals("register_optimizer: optimizer 'sgd' is registered twice"));
  CHECK_THROWS_WITH(optim::register_optimizer({.name = "no-make"}),
                    Catch::Matchers::Equals("register_optimizer: optimizer 'no-make' lacks make"));
  CHECK_THROWS_WITH(register_task({.name = "order"}), Catch::Matchers::Equals("register_task: task 'order' lacks next, labels or words"));
  CHECK_THROWS_WITH(register_task(TaskEntry(task_registry().at("order"))),
                    Catch::Matchers::Equals("register_task: task 'order' is registered twice"));
  CHECK(optim::optimizers().names() == std::vector<std::string>{"adam", "adamw", "sgd", "sign-sgd"});
  CHECK(task_registry().names() == std::vector<std::string>{"majority", "order", "first-word"});
}
