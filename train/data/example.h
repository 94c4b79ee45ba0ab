#pragma once
// The unit of data every source yields: a labelled text from a task stream (tasks.h) or a TSV file (tsv.h);
// for a language model, a window of token ids (token_windows.h).
#include <cstdint>
#include <string>
#include <vector>

namespace tapegrad {

/// One labelled text, or one window of a language model's text.
struct Example {
  std::string label;
  std::string text;
  // A language model's window: consecutive token ids, read but for the last and predicted but for the
  // first (label and text are then empty).
  std::vector<int64_t> tokens = {};
  friend bool operator==(const Example&, const Example&) = default;
};

}  // namespace tapegrad
