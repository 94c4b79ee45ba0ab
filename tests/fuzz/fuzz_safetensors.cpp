// libFuzzer target: the safetensors reader on arbitrary bytes. Its contract: a tapegrad::Error (an
// IOError naming the file) or a file whose tensors exactly tile the bytes; any other exception, a crash,
// a leak or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "autograd/error.h"
#include "train/checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const tapegrad::SafetensorsFile file = tapegrad::parse_safetensors(bytes, "fuzz.safetensors");
    // Accepted: the tensors account for every byte after the header, and each name is found again.
    uint64_t header = 0;
    for (int i = 0; i < 8; ++i) header |= static_cast<uint64_t>(data[i]) << (8 * i);
    uint64_t held = 0;
    for (const auto& [name, t] : file.tensors) {
      held += static_cast<uint64_t>(t.numel()) * tapegrad::itemsize(t.dtype());
      if (&file.at(name) != &t) __builtin_trap();  // names are unique
    }
    if (held != size - 8 - header) __builtin_trap();
  } catch (const tapegrad::Error&) {
  }
  return 0;
}
