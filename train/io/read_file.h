#pragma once
// Reading a whole input file, treating it as hostile: every reader of tapegrad's file formats (config.json,
// trainer.json, vocab.txt, labels.txt, TSV data, safetensors) goes through read_whole_file and then parses
// the bytes from memory, so the same parser serves files, pipes and a fuzzer.
//   - a regular file is read whole; a FIFO (a pipe, `<(command)`) is read once to its end, so a caller
//     must not open the same path again;
//   - a directory, a character or block device and a socket are refused by name before anything is read
//     (a device such as /dev/zero never ends);
//   - each kind of file has a size limit, checked against a regular file's size before reading and
//     against the bytes read so far for a pipe, so nothing allocates without bound.
// Errors are IOErrors "path: what is wrong", with the system's errno text where there is one.
#include <cstdint>
#include <string>

namespace tapegrad {

/// Size limits per kind of file, with why each is far above any real file of that kind.
struct FileLimit {
  const char* kind;  // "a JSON file", "a vocabulary", ...: named in the error
  uint64_t bytes;
};
/// config.json and trainer.json: a few hundred bytes written by tapegrad; 16 MiB leaves room for anything.
inline constexpr FileLimit kJsonFileLimit{"a JSON settings file", uint64_t{16} << 20};
/// vocab.txt and labels.txt: one short token per line; 256 MiB is tens of millions of tokens.
inline constexpr FileLimit kTokenListLimit{"a vocabulary or label list", uint64_t{256} << 20};
/// TSV data: tapegrad holds a data set in memory (the text, then every example's strings and ids, about
/// three times the file), and trains on a CPU, where 1 GiB of text is already days of epochs.
inline constexpr FileLimit kTsvLimit{"a TSV data file", uint64_t{1} << 30};
/// A language model's text: its tokens are held as 8-byte ids beside it (up to 9 times the file in memory),
/// and 256 MiB of text is weeks of training on a CPU.
inline constexpr FileLimit kTextLimit{"a text file", uint64_t{256} << 20};
/// safetensors: read whole, then copied into tensors (twice the file at the peak); 4 GiB is a billion
/// float32 weights, beyond any model tapegrad trains on a CPU.
inline constexpr FileLimit kSafetensorsLimit{"a safetensors file", uint64_t{4} << 30};

/// The whole content of path (see above); IOError naming the path for a directory, a device, a socket,
/// a file over the limit (naming the limit), or a failed open or read (with errno's text).
std::string read_whole_file(const std::string& path, const FileLimit& limit);

}  // namespace tapegrad
