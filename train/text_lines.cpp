#include "train/text_lines.h"

#include "autograd/error.h"

namespace tapegrad {

size_t utf8_sequence_length(std::string_view text, size_t i) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const unsigned char c = s[i];
  if (c < 0x80) return 1;
  // Lead byte: the sequence length and the allowed range of the second byte (which excludes overlong
  // forms, UTF-16 surrogates D800..DFFF and code points above 10FFFF); later bytes are 80..BF.
  size_t length;
  unsigned char lo = 0x80, hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
    length = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    length = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    length = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;  // a continuation byte without a lead, C0/C1 (overlong) or F5..FF
  }
  if (i + length > text.size()) return 0;
  if (s[i + 1] < lo || s[i + 1] > hi) return 0;
  for (size_t k = 2; k < length; ++k)
    if (s[i + k] < 0x80 || s[i + k] > 0xbf) return 0;
  return length;
}

size_t find_invalid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t length = utf8_sequence_length(text, i);
    if (length == 0) return i;
    i += length;
  }
  return text.size();
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
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (const size_t bad = find_invalid_utf8(line); bad != line.size())
      throw IOError(cat(path, ":", number, ": invalid UTF-8 at byte ", bad + 1, " of the line"));
    if (const size_t nul = line.find('\0'); nul != std::string_view::npos)
      throw IOError(cat(path, ":", number, ": NUL byte at byte ", nul + 1, " of the line (a binary file?)"));
    on_line(number, line);
  }
  return number;
}

}  // namespace tapegrad
