#pragma once
// safetensors files (the Hugging Face format), for checkpoints and exported weights.
//   bytes [0, 8)       : N, the header length, u64 little-endian
//   bytes [8, 8 + N)   : the header, a UTF-8 JSON object, padded with spaces:
//                        {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//                         "__metadata__": {"key": "value", ...}}   (metadata optional, strings only)
//   bytes [8 + N, EOF) : the buffer; offsets are relative to its start, each tensor's bytes are contiguous,
//                        row-major and little-endian, and the tensors tile the buffer exactly.
// dtypes: F32 = float32, F64 = float64, I64 = int64, BOOL = bool (one byte, 0 or 1).
// Writing pads the header to a multiple of 8 so that every tensor starts 8-byte aligned in the file.
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace tapegrad {

/// The largest header we read (the reference implementation's limit too).
inline constexpr uint64_t kMaxSafetensorsHeader = uint64_t{100} << 20;

struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in the header's order
  std::map<std::string, std::string> metadata;

  /// The tensor of this name; a missing name is a ValueError.
  const Tensor& at(const std::string& name) const;
  bool contains(const std::string& name) const;
};

/// Writes the tensors (any strides; they are written contiguous) in the given order, atomically
/// (write_file_atomic, atomic_file.h: a crash at any moment leaves either the old file or the new one
/// whole). Duplicate or empty names and the name "__metadata__" are ValueErrors; a failed write is an
/// IOError naming the file (and the .tmp file is removed).
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Parses the bytes of a safetensors file, treating them as hostile: every size and offset is checked
/// before use, and any malformation (short file, header length out of bounds or over 100 MiB, a header
/// that is not UTF-8 or not JSON or nests too deep, unknown dtype, unknown or missing field, bad shape,
/// size mismatch, offsets out of the buffer, overlaps or gaps, duplicate or empty names, non-string
/// metadata, a BOOL byte other than 0 and 1) is an IOError naming `name` (the file) and, where there is
/// one, the tensor. Nothing is read outside bytes, and tensors allocate no more than bytes.size().
SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& name);

/// Reads the file whole (read_whole_file: a regular file or a pipe, at most 4 GiB) and parses it.
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace tapegrad
