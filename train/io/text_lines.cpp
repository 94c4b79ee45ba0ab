#include "train/io/text_lines.h"

#include <utf8.h>

#include "autograd/error.h"

namespace tapegrad {

size_t find_invalid_utf8(std::string_view text) {
  return static_cast<size_t>(utf8::find_invalid(text.begin(), text.end()) - text.begin());
}

std::string line_problem(std::string_view line, std::string_view what) {
  if (const size_t bad = find_invalid_utf8(line); bad != line.size())
    return cat("invalid UTF-8 at byte ", bad + 1, " of the ", what);
  if (const size_t nul = line.find('\0'); nul != std::string_view::npos)
    return cat("NUL byte at byte ", nul + 1, " of the ", what, " (a binary file?)");
  if (const size_t cr = line.find('\r'); cr != std::string_view::npos)
    return cat("carriage return without a line feed at byte ", cr + 1, " of the ", what,
               ": CR-only line endings (classic Mac OS) are not read; convert them to LF or CRLF");
  return {};
}

int64_t for_each_line(std::string_view text, const std::string& path,
                      const std::function<void(int64_t number, std::string_view line)>& on_line) {
  if (text.substr(0, 3) == "\xef\xbb\xbf") text.remove_prefix(3);
  int64_t number = 0;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF, or a last CR without its LF
    if (const std::string problem = line_problem(line); !problem.empty())
      throw IOError(cat(path, ":", number, ": ", problem));
    on_line(number, line);
  }
  return number;
}

}  // namespace tapegrad
