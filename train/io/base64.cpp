#include "train/io/base64.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "autograd/error.h"

namespace tapegrad {

namespace {

constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The 6-bit value of each character, or -1 for a character outside the alphabet.
constexpr std::array<int8_t, 256> kValues = [] {
  std::array<int8_t, 256> values{};
  values.fill(-1);
  for (size_t i = 0; i < kAlphabet.size(); ++i)
    values[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  return values;
}();

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    // The group's bytes as one 24-bit number, missing bytes zero; each character takes the next 6 bits.
    uint32_t group = 0;
    for (size_t k = 0; k < 3; ++k)
      group = group << 8 | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[group >> (18 - 6 * k) & 63] : '=';
  }
  return out;
}

std::string base64_decode(std::string_view text) {
  if (text.size() % 4 != 0)
    throw ValueError(cat("base64: ", text.size(), " characters, not a multiple of 4"));
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    // '=' pads only the last group, one or two of them at its end: "xy==" holds 1 byte, "xyz=" 2.
    const size_t padding = last ? (text[i + 3] == '=') + (text[i + 3] == '=' && text[i + 2] == '=') : 0;
    uint32_t group = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      const int8_t value = k < 4 - padding ? kValues[static_cast<unsigned char>(c)] : 0;
      if (value < 0)
        throw ValueError(cat("base64: character ", i + k + 1, (c == '=' ? " '=' pads only the end of the text"
                                                                     : " is not in the base64 alphabet")));
      group = group << 6 | static_cast<uint32_t>(value);
    }
    const size_t n = 3 - padding;
    // Bits below the last byte come from the last character; an encoder leaves them zero.
    if (group & ((1u << (8 * padding)) - 1))
      throw ValueError(cat("base64: character ", i + 4 - padding, " has bits set past the last byte"));
    for (size_t k = 0; k < n; ++k) out += static_cast<char>(group >> (16 - 8 * k) & 255);
  }
  return out;
}

}  // namespace tapegrad
