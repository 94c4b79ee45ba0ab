#pragma once
// The line formats tapegrad reads (vocab.txt, labels.txt, TSV data, predict's stdin) are UTF-8 text, one
// item a line. They agree on what a line is:
//   - a line ends at '\n'; a '\r' right before it (CRLF) is dropped, as is a '\r' ending the text (a CRLF
//     file whose last LF was lost); a byte order mark at the start of the text is dropped. Files saved by
//     Windows editors are common and unambiguous.
//   - any other '\r' is refused, with the line: a file with CR-only line ends (classic Mac OS) would
//     otherwise read as one long line and fail later with a message about something else (no tab, a
//     token with whitespace), and a stray CR inside a text is a control character no token holds.
//     Converting such a file is one command (`tr '\r' '\n'`); guessing would be ambiguous for a file
//     mixing CR and LF.
//   - invalid UTF-8 and NUL bytes are refused with the line, since no token, label or text holds them.
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

/// The problem with one line's bytes, "invalid UTF-8 at byte 3 of the line" and the like (the rules
/// above: invalid UTF-8, a NUL byte, a carriage return), or an empty string when the line is fine.
/// `what` names the unit in the message: "line", or "text" for a --text value.
std::string line_problem(std::string_view line, std::string_view what = "line");

/// Calls on_line(number, line) for each line of text (numbered from 1, without its '\n' or the '\r' of
/// CRLF; a last line without '\n' counts, an empty text has no lines), after checking it by the rules
/// above: a bad line is an IOError "path:number: <line_problem>". Returns the number of lines.
int64_t for_each_line(std::string_view text, const std::string& path,
                      const std::function<void(int64_t number, std::string_view line)>& on_line);

}  // namespace tapegrad
