#pragma once
// The byte layout of a safetensors file's header, checked before its JSON is parsed: 8 bytes of length, a
// JSON object, spaces as padding (the format section of huggingface/safetensors' README.md).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tapegrad {

/// The header length N: the first 8 bytes, little-endian.
uint64_t header_length(const char* first8);
/// The length of the JSON object the header starts with: up to the '}' that closes its first '{',
/// counting brackets outside strings; the whole header when they never close (the parser then says
/// what is wrong). Only a valid object is ever used this way: the parser checks the bytes it spans.
size_t header_object_length(std::string_view text);
/// IOError naming path unless the bytes after the header's JSON object are spaces only.
void check_header_padding(std::string_view text, size_t object_length, const std::string& path);
/// IOError naming path when N runs past the file or exceeds kMaxSafetensorsHeader.
void check_header_length(uint64_t N, uint64_t file_size, const std::string& path);

}  // namespace tapegrad
