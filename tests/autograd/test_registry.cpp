// The registry of gradient checks: every registered case passes in float64, and every node kind that
// exists is exercised by at least one case, so an op cannot land without a gradcheck.
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "autograd/autograd.h"

using namespace tapegrad;

TEST_CASE("every registered gradcheck case passes in float64") {
  const auto& cases = gradcheck_cases();
  REQUIRE(cases.size() >= 40);
  for (const GradcheckCase& c : cases) {
    const GradcheckResult result = c.run(GradcheckOptions::float64());
    INFO(c.name << "\n" << result.str());
    CHECK(result.passed);
    CHECK(result.max_rel_error() < 1e-5);
  }
}

TEST_CASE("every node kind has a gradcheck case that records it") {
  REQUIRE(node_kinds().size() >= 20);
  for (const std::string& kind : node_kinds_without_case()) {
    INFO("node kind '" << kind << "' is recorded by no gradcheck case: register one next to the op");
    CHECK(false);
  }
}

TEST_CASE("the registered cases also pass in float32 with the documented tolerances") {
  for (const GradcheckCase& c : gradcheck_cases()) {
    const GradcheckResult result = c.run(GradcheckOptions::float32());
    INFO(c.name << "\n" << result.str());
    CHECK(result.passed);
  }
}
