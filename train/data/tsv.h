#pragma once
// User data: one example per line, `label<TAB>text`, UTF-8.
//   - the label is everything before the first tab, the text everything after it (further tabs are
//     whitespace inside the text);
//   - a trailing '\r' (CRLF files) and a UTF-8 byte order mark at the start of the file are ignored;
//   - blank lines (empty or only whitespace) are skipped;
//   - errors are IOErrors "file:line: what is wrong": a missing tab, an empty label or one with leading or
//     trailing whitespace, a text with no words, invalid UTF-8, a NUL byte; also an unreadable file, a
//     directory or device, a file over 1 GiB (read_file.h says why) and a file with no examples.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "train/data/example.h"
#include "train/io/text_lines.h"

namespace tapegrad {

struct LabelledData {
  std::vector<Example> examples;  // in file order
};

/// Parses the text of a label<TAB>text file (see above); any problem is an IOError naming `name` (the
/// file) and the line.
LabelledData parse_tsv(std::string_view text, const std::string& name);
/// Reads a label<TAB>text file whole (a regular file or a pipe, read once; at most 1 GiB) and parses it.
LabelledData read_tsv(const std::string& path);

/// The distinct labels of the examples, sorted bytewise; a label's index is its class id.
std::vector<std::string> sorted_labels(const std::vector<Example>& examples);

struct Split {
  std::vector<Example> train;  // in input order
  std::vector<Example> valid;  // in input order
};

/// A seeded random split: round(valid_fraction * n) examples go to valid, chosen uniformly with the
/// generator; when valid_fraction > 0 and n >= 2, valid gets at least one and train keeps at least one.
/// valid_fraction outside [0, 1) is a ValueError. The same inputs and seed give the same split.
Split split(const std::vector<Example>& examples, double valid_fraction, uint64_t seed);

}  // namespace tapegrad
