// libFuzzer target: the TSV data reader on arbitrary text. Accepted examples have a label without tabs
// or surrounding whitespace and a text with a word; a seeded split partitions them. Anything else must be
// a tapegrad::Error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "autograd/error.h"
#include "train/data/tsv.h"
#include "train/data/vocab.h"

using namespace tapegrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const LabelledData parsed = parse_tsv(text, "fuzz.tsv");
    for (const Example& e : parsed.examples) {
      if (e.label.empty() || e.label.find('\t') != std::string::npos || e.label.find('\n') != std::string::npos)
        __builtin_trap();
      if (split_words(e.text).empty() || find_invalid_utf8(e.text) != e.text.size()) __builtin_trap();
    }
    const Split parts = split(parsed.examples, 0.25, size);
    if (parts.train.size() + parts.valid.size() != parsed.examples.size()) __builtin_trap();
    if (sorted_labels(parsed.examples).empty()) __builtin_trap();
  } catch (const Error&) {
  }
  return 0;
}
