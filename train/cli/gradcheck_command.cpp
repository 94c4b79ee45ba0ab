#include "train/cli/gradcheck_command.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <vector>
#include <nlohmann/json.hpp>

#include "autograd/autograd.h"

namespace tapegrad::cli {

using nlohmann::json;

void add_gradcheck(CLI::App& app, GradcheckFlags& f) {
  auto* cmd = app.add_subcommand("gradcheck", "Run the float64 gradient checks of every op and layer");
  auto* as_json = cmd->add_flag("--json", f.json, "One JSON object with every case");
  cmd->add_option("--filter", f.filter, "Only cases whose name contains this");
  cmd->add_flag("--list", f.list, "Print the names of the cases (those --filter picks) without running them")
      ->excludes(as_json);
  cmd->callback([&f] {
    const bool as_json = f.json;
    const std::string& filter = f.filter;
    json cases = json::array();
    int failed = 0, run = 0;
    double worst_rel = 0;
    std::vector<const GradcheckCase*> chosen;
    for (const GradcheckCase& c : gradcheck_cases())
      if (c.name.find(filter) != std::string::npos) chosen.push_back(&c);
    if (chosen.empty())  // before any output: a mistyped filter in CI must not look green
      throw ValueError(cat("--filter '", filter, "' matches none of the ", gradcheck_cases().size(),
                           " cases (tapegrad gradcheck --list names them all)"));
    if (f.list) {
      for (const GradcheckCase* c : chosen) std::printf("%s\n", c->name.c_str());
      return;
    }
    if (!as_json) std::printf("%-48s %12s %12s  %s\n", "case", "max abs err", "max rel err", "result");
    for (const GradcheckCase* chosen_case : chosen) {
      const GradcheckCase& c = *chosen_case;
      const GradcheckResult r = c.run(GradcheckOptions::float64());
      ++run;
      failed += !r.passed;
      worst_rel = std::max(worst_rel, r.max_rel_error());
      if (as_json)
        cases.push_back({{"name", c.name}, {"max_abs_error", r.max_abs_error()}, {"max_rel_error", r.max_rel_error()},
                         {"passed", r.passed}});
      else
        std::printf("%-48s %12.3e %12.3e  %s\n", c.name.c_str(), r.max_abs_error(), r.max_rel_error(), r.passed ? "pass" : "FAIL");
    }
    if (as_json)
      std::cout << json{{"cases", cases}, {"passed", run - failed}, {"failed", failed}, {"worst_rel_error", worst_rel}}.dump()
                << std::endl;
    else
      std::printf("%d passed, %d failed (worst relative error %.3e)\n", run - failed, failed, worst_rel);
    if (failed) throw ValueError(cat("gradcheck: ", failed, " case(s) failed"));
  });
}

}  // namespace tapegrad::cli
