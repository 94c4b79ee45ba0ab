// Learning-rate schedules at the warm-up and decay boundaries, on numbers worked out by hand with
// base_lr = 1, warmup_steps = 4, total_steps = 12 (so the decay runs over steps 4..11, p = (step − 4)/8).
#include <catch2/catch.hpp>
#include <cmath>

#include "optim/schedule.h"

using namespace tapegrad;
using namespace tapegrad::optim;

TEST_CASE("optim: warm-up rises linearly to base_lr on step warmup − 1") {
  for (const char* kind : {"constant", "cosine", "linear"}) {
    INFO(kind);
    const LrSchedule s{kind, 1.0, 4, 12};
    CHECK(s.lr_at(0) == 0.25);
    CHECK(s.lr_at(1) == 0.5);
    CHECK(s.lr_at(2) == 0.75);
    CHECK(s.lr_at(3) == 1.0);
    CHECK(s.lr_at(4) == 1.0);  // the first decay step starts at base (p = 0)
  }
}

TEST_CASE("optim: cosine decays from base_lr to min_lr") {
  const LrSchedule s{"cosine", 1.0, 4, 12};
  CHECK(s.lr_at(6) == Approx(0.5 * (1 + std::sqrt(0.5))).epsilon(1e-15));  // p = 1/4: cos(π/4) = √2/2
  CHECK(s.lr_at(8) == Approx(0.5).epsilon(1e-15));                         // p = 1/2
  CHECK(s.lr_at(11) == Approx(0.038060233744356624).epsilon(1e-14));       // p = 7/8: (1 − cos(π/8))/2
  CHECK(s.lr_at(12) == 0.0);                                               // from total_steps on: min_lr
  CHECK(s.lr_at(1000) == 0.0);
  const LrSchedule floor{"cosine", 1.0, 4, 12, 0.1};
  CHECK(floor.lr_at(3) == 1.0);
  CHECK(floor.lr_at(8) == Approx(0.55).epsilon(1e-15));  // 0.1 + 0.9·0.5
  CHECK(floor.lr_at(12) == 0.1);
}

TEST_CASE("optim: linear decays from base_lr to min_lr") {
  const LrSchedule s{"linear", 1.0, 4, 12};
  CHECK(s.lr_at(8) == 0.5);
  CHECK(s.lr_at(11) == 0.125);
  CHECK(s.lr_at(12) == 0.0);
  const LrSchedule floor{"linear", 1.0, 4, 12, 0.2};
  CHECK(floor.lr_at(10) == Approx(0.4).epsilon(1e-15));  // p = 3/4: 0.2 + 0.8·0.25
  CHECK(floor.lr_at(50) == 0.2);
}

TEST_CASE("optim: constant holds base_lr after warm-up, and no warm-up starts at base_lr") {
  const LrSchedule s{"constant", 3e-4, 2, 0};
  CHECK(s.lr_at(0) == 1.5e-4);
  CHECK(s.lr_at(1) == 3e-4);
  CHECK(s.lr_at(1000000) == 3e-4);
  CHECK(LrSchedule{"cosine", 2.0, 0, 10}.lr_at(0) == 2.0);
  CHECK(LrSchedule{"linear", 2.0, 0, 10}.lr_at(5) == 1.0);
  CHECK(LrSchedule{"linear", 2.0, 1, 10}.lr_at(0) == 2.0);
}

TEST_CASE("optim: schedules are chosen by name from their registry, which lists them otherwise") {
  CHECK(schedules().names() == std::vector<std::string>{"constant", "cosine", "linear"});
  CHECK_FALSE(schedules().at("constant").factor);  // no decay
  CHECK(schedules().at("cosine").factor(0.5) == Approx(0.5));
  CHECK(schedules().at("linear").factor(0.25) == 0.75);
  CHECK_THROWS_AS(schedules().at("Cosine"), ValueError);
  CHECK_THROWS_WITH(schedules().at("step"),
                    Catch::Matchers::Equals("unknown learning-rate schedule 'step' (registered: constant, cosine or linear)"));
  CHECK_THROWS_WITH((LrSchedule{"step", 1.0, 0, 10}.lr_at(0)), Catch::Contains("unknown learning-rate schedule 'step'"));
  CHECK_THROWS_WITH(register_schedule({.name = "cosine"}),
                    Catch::Matchers::Equals("register_schedule: learning-rate schedule 'cosine' is registered twice"));
  CHECK_THROWS_WITH(register_schedule({}), Catch::Matchers::Equals("register_schedule: a learning-rate schedule needs a name"));
  CHECK(schedules().names().size() == 3);  // nothing was added by the refused calls
}

TEST_CASE("optim: inconsistent schedules are refused") {
  CHECK_THROWS_WITH((LrSchedule{"cosine", 1.0, 4, 12}.lr_at(-1)), Catch::Contains("step must be >= 0"));
  CHECK_THROWS_WITH((LrSchedule{"cosine", 1.0, 4, 12, 2.0}.lr_at(0)), Catch::Contains("min_lr"));
  CHECK_THROWS_WITH((LrSchedule{"linear", 1.0, 4, 4}.lr_at(0)), Catch::Contains("total_steps"));
  CHECK_THROWS_WITH((LrSchedule{"cosine", 1.0, 0, 0}.lr_at(0)), Catch::Contains("total_steps"));
  CHECK_THROWS_AS((LrSchedule{"constant", -1.0, 0, 0}.lr_at(0)), ValueError);
  CHECK_THROWS_AS((LrSchedule{"constant", 1.0, -3, 0}.lr_at(0)), ValueError);
  CHECK(LrSchedule{"constant", 1.0, 0, 0}.lr_at(7) == 1.0);  // constant does not read total_steps
}
