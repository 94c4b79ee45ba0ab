#pragma once
// `tapegrad predict`: the label and class probabilities of texts given with --text or on stdin, and the
// attention maps of the first.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace tapegrad::cli {

struct PredictFlags {
  std::string checkpoint, attention_svg;
  std::vector<std::string> texts;
  bool json = false;
};

void add_predict(CLI::App& app, PredictFlags& flags);

}  // namespace tapegrad::cli
