#pragma once
// JSON settings files (config.json, trainer.json) read strictly. nlohmann's get<int64_t>() converts 32.5
// to 32 and true to 1, and a parsed object keeps the last of two equal keys: each would let a damaged or
// hand-edited file load as something its author did not write. Here every key must be present (unless
// read as optional), of exactly its type, and known: a misspelt key is refused by name, not ignored.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tapegrad {

/// What a JSON parser's exception says, without the library's tag ("[json.exception.parse_error.101] "): the
/// line, column and what was wrong, for a message in tapegrad's words.
std::string json_error_text(const nlohmann::json::exception& error);

/// Parses text as JSON, refusing an empty text, invalid JSON or UTF-8, a key twice in one object and
/// containers nested deeper than max_depth (the top-level value is depth 0): IOError naming `name`.
nlohmann::json parse_json_strictly(std::string_view text, const std::string& name, int max_depth);

/// The fields of one JSON object, each read with its exact type. Errors are IOErrors
/// "<file>: '<prefix><key>' <what is wrong>", e.g. "config.json: 'd_model' must be an integer, got 32.5".
class JsonFields {
 public:
  /// object must be a JSON object (else an IOError naming prefix, or "the file" at the top).
  JsonFields(const nlohmann::json& object, std::string file, std::string prefix = "");

  bool has(const char* key) const { return object_.contains(key); }
  /// An integer in int64's range (not 32.0: a float where an integer belongs is refused).
  int64_t integer(const char* key);
  /// A non-negative integer in uint64's range.
  uint64_t unsigned_integer(const char* key);
  /// An integer in [lo, hi]: a field whose value a program wrote from a counter, refused when edited out of it.
  int64_t integer_in(const char* key, int64_t lo, int64_t hi);
  /// Any finite number, integer or not.
  double number(const char* key);
  /// A finite number in [lo, hi].
  double number_in(const char* key, double lo, double hi);
  bool boolean(const char* key);
  std::string string(const char* key);
  /// A nested object (for a JsonFields of its own, with prefix "<key>.").
  const nlohmann::json& object(const char* key);
  /// An array (of exactly `size` elements when given), each read by the caller (messages by quoted(key)).
  const nlohmann::json& array(const char* key, std::optional<size_t> size = std::nullopt);
  /// Refuses every key that no read asked for (the first few by name).
  void refuse_unknown() const;

  const std::string& file() const { return file_; }
  /// "'<prefix><key>'", for messages about a value read here.
  std::string quoted(const char* key) const { return "'" + prefix_ + key + "'"; }

 private:
  const nlohmann::json& get(const char* key);
  [[noreturn]] void fail(const char* key, const std::string& what) const;

  const nlohmann::json& object_;
  std::string file_, prefix_;
  std::set<std::string> read_;
};

/// Reads an options object by example: `example` is to_json of the struct's defaults, and gives every key
/// and its JSON type. Every key of the example must be present (but those named in `optional`, at any
/// depth, which take the example's value), read as JsonFields reads its type (an integer where the example has an integer, not
/// 32.0; any finite number where it has a float; a non-negative integer where it has an unsigned one; a
/// nested object likewise, with prefix "<key>."), and no other key. Returns the object with the optional
/// keys filled in, ready for nlohmann's get<T>() (so the struct's NLOHMANN_DEFINE_TYPE_* macros read it).
nlohmann::json checked_like(const nlohmann::json& object, const nlohmann::json& example, const std::string& file,
                            const std::string& prefix = "", const std::set<std::string>& optional = {});

}  // namespace tapegrad
