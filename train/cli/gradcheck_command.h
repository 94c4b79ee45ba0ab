#pragma once
// `tapegrad gradcheck`: the float64 gradient checks of every registered op and layer.
#include <CLI/CLI.hpp>
#include <string>

namespace tapegrad::cli {

struct GradcheckFlags {
  bool json = false, list = false;
  std::string filter;
};

void add_gradcheck(CLI::App& app, GradcheckFlags& flags);

}  // namespace tapegrad::cli
