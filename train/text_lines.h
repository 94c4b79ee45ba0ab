#pragma once
// The line formats tapegrad reads (vocab.txt, labels.txt, TSV data) are UTF-8 text, one item a line. They
// agree on what a line is: a byte order mark at the start of the file and the '\r' of CRLF line ends are
// dropped (files saved by Windows editors are common and unambiguous); invalid UTF-8 and NUL bytes are
// refused with the line, since no token, label or text holds them.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace tapegrad {

/// Offset of the first byte that is not part of valid UTF-8 (overlong forms, surrogates and code points
/// above U+10FFFF are invalid), or text.size() when all of it is valid. utf8cpp (libutfcpp-dev) does the
/// work; tests/train/test_tsv.cpp pins each kind of invalid sequence and the offset reported.
size_t find_invalid_utf8(std::string_view text);

/// Calls on_line(number, line) for each line of text (numbered from 1, without its '\n' or '\r'; a last
/// line without '\n' counts, an empty text has no lines), after checking it: invalid UTF-8 or a NUL byte
/// is an IOError "path:number: ...". Returns the number of lines.
int64_t for_each_line(std::string_view text, const std::string& path,
                      const std::function<void(int64_t number, std::string_view line)>& on_line);

}  // namespace tapegrad
