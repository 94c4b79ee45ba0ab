#pragma once
// Errors are typed exceptions. Every message names the op or file and says what is wrong,
// e.g. "matmul: [2,3] @ [4,5]: inner dims 3 and 4 differ".
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace tapegrad {

/// Base of every error tapegrad throws.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// Shapes that do not fit the op (rank, broadcast, inner dims, out-of-range dim).
struct ShapeError : Error {
  using Error::Error;
};
/// A dtype the op does not take (float op on int64 ids, mixed float32/float64, ...).
struct DTypeError : Error {
  using Error::Error;
};
/// A value out of its domain (dropout p outside [0,1), id outside the vocabulary, ...).
struct ValueError : Error {
  using Error::Error;
};
/// Misuse of the tape: backward on a non-scalar without a gradient, over a released tape, ...
struct AutogradError : Error {
  using Error::Error;
};
/// A file that cannot be read or written, or whose contents are malformed.
struct IOError : Error {
  using Error::Error;
};

/// Concatenates anything streamable into one string: cat("softmax: dim ", d, " out of range").
template <class... Parts>
std::string cat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

/// A name as a message shows it, in single quotes: in_quotes("relu") is 'relu'. A name read from a file may hold
/// anything, so a control character, a byte past ASCII, a quote or a backslash is written as an escape
/// ('re\nlu', '\xc3\xa9'): the message stays one line and says exactly which bytes the file held.
inline std::string in_quotes(std::string_view name) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\\' || c == '\'') {
      out += {'\\', c};
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte >= 0x7f) {
      out += {'\\', 'x', kHex[byte >> 4], kHex[byte & 15]};
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace tapegrad
