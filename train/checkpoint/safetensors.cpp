#include "train/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "autograd/error.h"
#include "train/checkpoint/safetensors_layout.h"
#include "train/io/atomic_file.h"
#include "train/io/read_file.h"
#include "train/io/text_lines.h"
#include "train/io/strict_json.h"

namespace tapegrad {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and is copied as is: a big-endian host needs byte swaps here");

namespace {

using Json = nlohmann::ordered_json;  // keeps the header's order, which is the order tensors are returned in

const char* safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::float32: return "F32";
    case DType::float64: return "F64";
    case DType::int64: return "I64";
    case DType::boolean: return "BOOL";
  }
  return "?";
}

bool parse_dtype(const std::string& name, DType& out) {
  for (DType d : {DType::float32, DType::float64, DType::int64, DType::boolean})
    if (name == safetensors_dtype(d)) {
      out = d;
      return true;
    }
  return false;
}

// ---------------------------------------------------------------- reading

/// A name from the file as a JSON string ("a\nb"), cut to 80 characters: errors stay one short line.
std::string escaped(const std::string& name) {
  std::string text = Json(name).dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

bool has_control_character(const std::string& name) {
  return std::any_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;  // relative to the buffer
};

/// JSON parser callback: refuses duplicate keys in any object (the parser would silently keep the last
/// one, letting two headers hide in one file) and nesting deeper than a header has.
class HeaderGuard {
 public:
  explicit HeaderGuard(const std::string& path) : path_(path) {}
  bool operator()(int depth, Json::parse_event_t event, Json& parsed) {
    // The deepest container of a valid header is a shape or data_offsets array, opened at depth 2.
    constexpr int kMaxOpenDepth = 2;
    switch (event) {
      case Json::parse_event_t::object_start:
        if (depth > kMaxOpenDepth) throw IOError(cat(path_, ": header nests deeper than a safetensors header"));
        keys_.emplace_back();
        break;
      case Json::parse_event_t::array_start:
        if (depth > kMaxOpenDepth) throw IOError(cat(path_, ": header nests deeper than a safetensors header"));
        break;
      case Json::parse_event_t::object_end: keys_.pop_back(); break;
      case Json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (!keys_.back().insert(key).second)
          throw IOError(cat(path_, ": header has the key ", escaped(key), " twice", depth == 1 ? "" : " in one entry"));
        break;
      }
      default: break;
    }
    return true;
  }

 private:
  std::string path_;
  std::vector<std::set<std::string>> keys_;  // the keys of each open object
};

/// A JSON array of non-negative integers as uint64 (JSON parses those as unsigned; negatives and
/// fractions are other types).
bool unsigned_array(const Json& j, std::vector<uint64_t>& out) {
  if (!j.is_array()) return false;
  out.clear();
  for (const Json& e : j) {
    if (!e.is_number_unsigned()) return false;
    out.push_back(e.get<uint64_t>());
  }
  return true;
}

Entry parse_entry(const std::string& path, const std::string& name, const Json& j, uint64_t buffer_size) {
  const auto fail = [&](const std::string& what) { return IOError(cat(path, ": tensor ", in_quotes(name), ": ", what)); };
  if (!j.is_object()) throw fail(cat("entry is a JSON ", j.type_name(), ", not an object"));
  for (const auto& [key, value] : j.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets") throw fail(cat("unknown field ", escaped(key)));
  if (!j.contains("dtype") || !j.contains("shape") || !j.contains("data_offsets"))
    throw fail("entry needs dtype, shape and data_offsets");

  Entry e;
  e.name = name;
  const Json& dtype = j["dtype"];
  if (!dtype.is_string()) throw fail("dtype is not a string");
  if (!parse_dtype(dtype.get<std::string>(), e.dtype))
    throw fail(cat("unsupported dtype ", dtype.dump(), " (tapegrad reads F32, F64, I64 and BOOL)"));

  std::vector<uint64_t> dims;
  if (!unsigned_array(j["shape"], dims))
    throw fail(cat("shape ", j["shape"].dump(), " is not an array of non-negative integers"));
  if (dims.size() > static_cast<size_t>(kMaxRank))
    throw fail(cat("shape has ", dims.size(), " dims; tensors have at most ", kMaxRank));
  // Bytes = product of dims * itemsize, computed without overflow. The product of the nonzero dims must
  // fit int64 even for an empty tensor, so that no later numel() overflows; a nonempty tensor's bytes must
  // fit the buffer.
  constexpr uint64_t kInt64Max = static_cast<uint64_t>(INT64_MAX);
  uint64_t nonzero_product = 1;
  bool has_zero = false;
  for (uint64_t d : dims) {
    if (d == 0) {
      has_zero = true;
      continue;
    }
    if (nonzero_product > kInt64Max / d)
      throw fail(cat("shape ", j["shape"].dump(), " has more elements than int64 holds"));
    nonzero_product *= d;
  }
  uint64_t nbytes = 0;
  if (!has_zero) {
    const uint64_t size = itemsize(e.dtype);
    uint64_t needed = 0;
    if (__builtin_mul_overflow(nonzero_product, size, &needed))
      throw fail(cat("shape ", j["shape"].dump(), " needs 2^64 bytes or more"));
    if (needed > buffer_size)
      throw fail(cat("shape ", j["shape"].dump(), " of ", dtype.get<std::string>(), " needs ", needed,
                     " bytes, more than the buffer's ", buffer_size));
    nbytes = needed;
  }
  for (uint64_t d : dims) e.shape.push_back(static_cast<int64_t>(d));  // each d <= INT64_MAX here

  std::vector<uint64_t> offsets;
  if (!unsigned_array(j["data_offsets"], offsets) || offsets.size() != 2)
    throw fail(cat("data_offsets ", j["data_offsets"].dump(), " is not [begin, end] of non-negative integers"));
  e.begin = offsets[0];
  e.end = offsets[1];
  if (e.begin > e.end) throw fail(cat("data_offsets [", e.begin, ", ", e.end, "] end before they begin"));
  if (e.end > buffer_size)
    throw fail(cat("data_offsets [", e.begin, ", ", e.end, "] run past the end of the ", buffer_size, "-byte buffer"));
  if (e.end - e.begin != nbytes)
    throw fail(cat("shape ", e.shape, " of ", dtype.get<std::string>(), " needs ", nbytes, " bytes but data_offsets [",
                   e.begin, ", ", e.end, "] hold ", e.end - e.begin));
  return e;
}

}  // namespace

const Tensor& SafetensorsFile::at(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw ValueError(cat("safetensors: no tensor named ", in_quotes(name)));
}

bool SafetensorsFile::contains(const std::string& name) const {
  return std::any_of(tensors.begin(), tensors.end(), [&](const auto& p) { return p.first == name; });
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<Tensor> contiguous;
  std::set<std::string> names;
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty()) throw ValueError(cat("save_safetensors ", path, ": a tensor has an empty name"));
    if (name == "__metadata__")
      throw ValueError(cat("save_safetensors ", path, ": '__metadata__' is reserved and cannot name a tensor"));
    if (!names.insert(name).second) throw ValueError(cat("save_safetensors ", path, ": tensor ", in_quotes(name), " twice"));
    if (!t.defined()) throw ValueError(cat("save_safetensors ", path, ": tensor ", in_quotes(name), " is undefined"));
    Tensor c = t.detach().contiguous();
    const uint64_t nbytes = static_cast<uint64_t>(c.numel()) * itemsize(c.dtype());
    Json entry = Json::object();
    entry["dtype"] = safetensors_dtype(c.dtype());
    entry["shape"] = c.shape().vec();
    entry["data_offsets"] = {offset, offset + nbytes};
    header[name] = std::move(entry);
    offset += nbytes;
    contiguous.push_back(std::move(c));
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // a name or metadata string that is not UTF-8
    throw ValueError(cat("save_safetensors ", path, ": ", json_error_text(e)));
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the buffer then starts 8-byte aligned
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));

  std::vector<std::string_view> pieces{{reinterpret_cast<const char*>(length), 8}, text};
  for (const Tensor& c : contiguous) {
    const size_t nbytes = static_cast<size_t>(c.numel()) * itemsize(c.dtype());
    if (nbytes == 0) continue;
    pieces.emplace_back(static_cast<const char*>(c.data_ptr()), nbytes);
  }
  write_file_atomic(path, pieces);
}

namespace {

/// The header text parsed: valid UTF-8, no NUL, one JSON object followed by nothing but padding.
Json parse_header(std::string_view text, const std::string& path) {
  if (text.empty() || text[0] != '{') throw IOError(cat(path, ": header does not start with '{'"));
  // nlohmann checks UTF-8 inside strings too, but this names the byte, and covers bytes outside strings.
  if (const size_t bad = find_invalid_utf8(text); bad != text.size())
    throw IOError(cat(path, ": header is not valid UTF-8 at byte ", 8 + bad, " of the file"));
  // nlohmann's lexer reads a NUL byte as the end of its input, so `{...}\0{"hidden": ...}` would parse as
  // its first object alone. JSON has no raw NUL (inside a string it is \u0000), so no header holds one.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    throw IOError(cat(path, ": header has a NUL byte at byte ", 8 + nul, " of the file (a header is JSON text)"));
  const std::string_view object = text.substr(0, header_object_length(text));
  Json header;
  try {
    header = Json::parse(object, HeaderGuard(path));
  } catch (const nlohmann::json::exception& e) {  // invalid JSON, a number out of range, ...
    throw IOError(cat(path, ": header is not valid JSON: ", json_error_text(e)));
  }
  check_header_padding(text, object.size(), path);
  if (!header.is_object()) throw IOError(cat(path, ": header is a JSON ", header.type_name(), ", not an object"));
  return header;
}

/// The header's tensor entries (checked against a buffer of buffer_size bytes), and its metadata into file.
std::vector<Entry> read_entries(const Json& header, uint64_t buffer_size, const std::string& path, SafetensorsFile& file) {
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) throw IOError(cat(path, ": __metadata__ is a JSON ", value.type_name(), ", not an object"));
      for (const auto& [key, v] : value.items()) {
        if (!v.is_string()) throw IOError(cat(path, ": __metadata__ ", escaped(key), " is not a string"));
        file.metadata[key] = v.get<std::string>();
      }
      continue;
    }
    if (name.empty()) throw IOError(cat(path, ": a tensor has an empty name"));
    // State names are identifiers with dots; a control character (a newline) would also break the
    // one-line error messages that quote the name.
    if (has_control_character(name)) throw IOError(cat(path, ": tensor name ", escaped(name), " contains a control character"));
    entries.push_back(parse_entry(path, name, value, buffer_size));
  }
  return entries;
}

/// The tensors must tile the buffer: sorted by offset, each begins where the previous ended, the last ends at
/// the end of the file. No overlaps (two names aliasing bytes) and no hidden bytes.
void check_tiling(const std::vector<Entry>& entries, uint64_t buffer_size, const std::string& path) {
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries) by_offset.push_back(&e);
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry* e : by_offset) {
    if (e->begin < covered)
      throw IOError(cat(path, ": tensor '", e->name, "' [", e->begin, ", ", e->end, ") overlaps tensor '",
                        previous->name, "' [", previous->begin, ", ", previous->end, ")"));
    if (e->begin > covered)
      throw IOError(cat(path, ": tensor '", e->name, "' begins at ", e->begin, ", leaving bytes [", covered, ", ",
                        e->begin, ") of the buffer unused"));
    covered = e->end;
    previous = e;
  }
  if (covered != buffer_size)
    throw IOError(cat(path, ": bytes [", covered, ", ", buffer_size, ") of the buffer belong to no tensor"));
}

/// The entry's bytes of the buffer as a tensor; a BOOL byte other than 0 or 1 is an IOError. The tiling is
/// checked: allocating (no more than the file's size) and copying cannot go out of bounds.
Tensor read_tensor(const Entry& e, std::string_view buffer, const std::string& path) {
  Tensor t = empty(e.shape, e.dtype);
  const uint64_t nbytes = e.end - e.begin;
  if (nbytes > 0) std::memcpy(t.data_ptr(), buffer.data() + e.begin, nbytes);
  if (e.dtype == DType::boolean) {
    const auto* flags = static_cast<const unsigned char*>(t.data_ptr());
    for (uint64_t i = 0; i < nbytes; ++i)
      if (flags[i] > 1) throw IOError(cat(path, ": tensor '", e.name, "': BOOL byte ", i, " is ", int(flags[i])));
  }
  return t;
}

}  // namespace

SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& path) {
  const uint64_t file_size = bytes.size();
  if (file_size < 8)
    throw IOError(cat(path, ": ", file_size, " bytes is too short for a safetensors file (8-byte header length)"));
  const uint64_t N = header_length(bytes.data());
  check_header_length(N, file_size, path);
  const Json header = parse_header(bytes.substr(8, N), path);
  const std::string_view buffer = bytes.substr(8 + N);
  SafetensorsFile file;
  const std::vector<Entry> entries = read_entries(header, buffer.size(), path, file);
  check_tiling(entries, buffer.size(), path);
  for (const Entry& e : entries) file.tensors.emplace_back(e.name, read_tensor(e, buffer, path));
  return file;
}

SafetensorsFile load_safetensors(const std::string& path) {
  // A regular file's header length is checked before the file is read whole, so a file claiming a header
  // of 2^63 bytes (or over the limit) costs 8 bytes of reading, not the whole file. A pipe can be read
  // only once: parse_safetensors checks it then.
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && info.st_size >= 8) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char length[8];
      const bool got = ::read(fd, length, 8) == 8;
      ::close(fd);
      if (got) check_header_length(header_length(length), static_cast<uint64_t>(info.st_size), path);
    }
  }
  return parse_safetensors(read_whole_file(path, kSafetensorsLimit), path);
}

}  // namespace tapegrad
