#include "train/io/strict_json.h"

#include <cmath>
#include <vector>

#include "autograd/error.h"

namespace tapegrad {

using nlohmann::json;

namespace {

std::string shown(const json& v);

/// Parser callback: refuses a key twice in one object and nesting deeper than the format has, and keeps the
/// path of keys to the value being read, for a message about a value the parser itself refuses.
class StrictGuard {
 public:
  StrictGuard(const std::string& name, int max_depth, std::vector<std::string>& path)
      : name_(name), max_depth_(max_depth), path_(&path) {}
  bool operator()(int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth > max_depth_) throw IOError(cat(name_, ": JSON nests deeper than ", max_depth_ + 1, " levels"));
        if (event == json::parse_event_t::object_start) {
          keys_.emplace_back();
          path_->emplace_back();
        }
        break;
      case json::parse_event_t::object_end:
        keys_.pop_back();
        path_->pop_back();
        break;
      case json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (!keys_.back().insert(key).second) throw IOError(cat(name_, ": key ", shown(json(key)), " appears twice"));
        path_->back() = key;
        break;
      }
      default: break;
    }
    return true;
  }

 private:
  std::string name_;
  int max_depth_;
  std::vector<std::set<std::string>> keys_;  // the keys of each open object
  std::vector<std::string>* path_;           // the key being read in each open object
};

/// "'timing.train_seconds'": the path to the value a parse error stopped at ("" at the top level).
std::string quoted_path(const std::vector<std::string>& path) {
  std::string joined;
  for (const std::string& key : path) joined += (joined.empty() ? "" : ".") + key;
  return joined.empty() ? "" : in_quotes(joined);
}

/// A value as it appears in the file, on one line and at most ~60 characters: error messages quote it.
std::string shown(const json& v) {
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

}  // namespace

std::string json_error_text(const json::exception& error) {
  std::string_view what = error.what();
  if (what.starts_with("[json.exception.")) {
    if (const size_t end = what.find("] "); end != std::string_view::npos) what.remove_prefix(end + 2);
  }
  return std::string(what);
}

json parse_json_strictly(std::string_view text, const std::string& name, int max_depth) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw IOError(cat(name, ": empty file (expected a JSON object)"));
  std::vector<std::string> path;
  try {
    return json::parse(text, StrictGuard(name, max_depth, path));
  } catch (const json::out_of_range& e) {  // a number beyond a double: the parser says no line, so name the key
    const std::string where = quoted_path(path);
    throw IOError(cat(name, ": ", where.empty() ? "" : where + ": ", json_error_text(e), " (beyond a double's range)"));
  } catch (const json::exception& e) {  // invalid JSON or UTF-8 (with its line and column), ...
    throw IOError(cat(name, ": not valid JSON: ", json_error_text(e)));
  }
}

JsonFields::JsonFields(const json& object, std::string file, std::string prefix)
    : object_(object), file_(std::move(file)), prefix_(std::move(prefix)) {
  if (!object_.is_object()) {
    const std::string what = prefix_.empty() ? std::string("the file") : cat("'", prefix_.substr(0, prefix_.size() - 1), "'");
    throw IOError(cat(file_, ": ", what, " must be a JSON object, got ", object_.type_name()));
  }
}

void JsonFields::fail(const char* key, const std::string& what) const {
  throw IOError(cat(file_, ": ", quoted(key), " ", what));
}

const json& JsonFields::get(const char* key) {
  const auto it = object_.find(key);
  if (it == object_.end()) fail(key, "is missing");
  read_.insert(key);
  return *it;
}

int64_t JsonFields::integer(const char* key) {
  const json& v = get(key);
  if (!v.is_number_integer()) fail(key, cat("must be an integer, got ", shown(v)));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    fail(key, cat("= ", shown(v), " is out of range"));
  return v.get<int64_t>();
}

int64_t JsonFields::integer_in(const char* key, int64_t lo, int64_t hi) {
  const int64_t value = integer(key);
  if (value < lo || value > hi) fail(key, cat("is ", value, ", outside [", lo, ", ", hi, "]"));
  return value;
}

uint64_t JsonFields::unsigned_integer(const char* key) {
  const json& v = get(key);
  if (!v.is_number_unsigned()) fail(key, cat("must be a non-negative integer, got ", shown(v)));
  return v.get<uint64_t>();
}

double JsonFields::number(const char* key) {
  const json& v = get(key);
  if (!v.is_number()) fail(key, cat("must be a number, got ", shown(v)));
  const double value = v.get<double>();
  if (!std::isfinite(value)) fail(key, cat("must be finite, got ", shown(v)));
  return value;
}

double JsonFields::number_in(const char* key, double lo, double hi) {
  const double value = number(key);
  if (value < lo || value > hi) fail(key, cat("is ", shown(object_.at(key)), ", outside [", lo, ", ", hi, "]"));
  return value;
}

bool JsonFields::boolean(const char* key) {
  const json& v = get(key);
  if (!v.is_boolean()) fail(key, cat("must be true or false, got ", shown(v)));
  return v.get<bool>();
}

std::string JsonFields::string(const char* key) {
  const json& v = get(key);
  if (!v.is_string()) fail(key, cat("must be a string, got ", shown(v)));
  return v.get<std::string>();
}

const json& JsonFields::object(const char* key) {
  const json& v = get(key);
  if (!v.is_object()) fail(key, cat("must be a JSON object, got ", v.type_name()));
  return v;
}

const json& JsonFields::array(const char* key, std::optional<size_t> size) {
  const json& v = get(key);
  if (!v.is_array()) fail(key, cat("must be an array, got ", shown(v)));
  if (size && v.size() != *size) fail(key, cat("must be an array of ", *size, " elements, got ", shown(v)));
  return v;
}

void JsonFields::refuse_unknown() const {
  std::vector<std::string> unknown;
  for (const auto& [key, _] : object_.items())
    if (!read_.count(key)) unknown.push_back(shown(json(prefix_ + key)));  // escaped: a key may hold a newline
  if (unknown.empty()) return;
  std::string names;
  for (size_t i = 0; i < unknown.size() && i < 5; ++i) names += (i ? ", " : "") + unknown[i];
  if (unknown.size() > 5) names += cat(" and ", unknown.size() - 5, " more");
  throw IOError(cat(file_, ": unknown key", unknown.size() > 1 ? "s " : " ", names,
                    " (a misspelt key would otherwise be ignored)"));
}

json checked_like(const json& object, const json& example, const std::string& file, const std::string& prefix,
                  const std::set<std::string>& optional) {
  JsonFields fields(object, file, prefix);
  json checked = object;
  for (const auto& [key, value] : example.items()) {
    const char* name = key.c_str();
    if (!fields.has(name) && optional.count(key)) {
      checked[key] = value;
      continue;
    }
    switch (value.type()) {
      case json::value_t::number_unsigned: fields.unsigned_integer(name); break;
      case json::value_t::number_integer: fields.integer(name); break;
      case json::value_t::number_float: fields.number(name); break;
      case json::value_t::boolean: fields.boolean(name); break;
      case json::value_t::string: fields.string(name); break;
      case json::value_t::object:
        checked[key] = checked_like(fields.object(name), value, file, prefix + key + ".", optional);
        break;
      default: throw std::logic_error(cat("checked_like: example key '", key, "' is a ", value.type_name()));
    }
  }
  fields.refuse_unknown();
  return checked;
}

}  // namespace tapegrad
