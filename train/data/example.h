#pragma once
// The unit of labelled data every source yields: a task stream (tasks.h), a TSV file (tsv.h).
#include <string>

namespace tapegrad {

/// One labelled text.
struct Example {
  std::string label;
  std::string text;
  friend bool operator==(const Example&, const Example&) = default;
};

}  // namespace tapegrad
