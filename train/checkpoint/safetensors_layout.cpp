#include "train/checkpoint/safetensors_layout.h"

#include "autograd/error.h"
#include "train/checkpoint/safetensors.h"

namespace tapegrad {

uint64_t header_length(const char* first8) {
  uint64_t N = 0;
  for (int i = 0; i < 8; ++i) N |= static_cast<uint64_t>(static_cast<unsigned char>(first8[i])) << (8 * i);
  return N;
}

size_t header_object_length(std::string_view text) {
  int64_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // an escaped character, '"' included
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return text.size();
}

/// The bytes of the header after its JSON object may only be spaces: "The header data MAY be trailing
/// padded with whitespace (0x20)" (the format section of huggingface/safetensors' README.md). A second
/// object, a newline or any other byte would be data that the parser never reads but another reader might.
void check_header_padding(std::string_view text, size_t object_length, const std::string& path) {
  for (size_t i = object_length; i < text.size(); ++i)
    if (text[i] != ' ')
      throw IOError(cat(path, ": header has byte 0x", "0123456789abcdef"[(text[i] >> 4) & 0xf],
                        "0123456789abcdef"[text[i] & 0xf], " at byte ", 8 + i,
                        " of the file, after its JSON object (bytes [8, ", 8 + object_length,
                        ")); only spaces (0x20) may pad a header"));
}

void check_header_length(uint64_t N, uint64_t file_size, const std::string& path) {
  if (N > file_size - 8)
    throw IOError(cat(path, ": header length ", N, " runs past the end of the ", file_size, "-byte file"));
  if (N > kMaxSafetensorsHeader)
    throw IOError(cat(path, ": header length ", N, " exceeds the limit of ", kMaxSafetensorsHeader, " bytes"));
}

}  // namespace tapegrad
