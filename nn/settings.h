#pragma once
// A variant's settings, declared once in its registration (nn/components.h), e.g. layernorm's
//   {.name = "eps", .type = SettingType::real, .default_value = 1e-5, .min = 0, .min_open = true,
//    .help = "added to the variance under the square root", .flag = "--norm-eps"}
// From that one declaration come: the value the variant reads (VariantSettings, the default when none was
// given), the check in nn::validate (the range, by field or by flag name), the config.json key under the
// component ("settings": {"norm": {"eps": 1e-05}}), the command-line flag (--norm-eps) with its --help text,
// and the row of docs/checkpoints.md's key table (a test compares the two).
// Values are kept per kind, not per variant: two variants of one kind may declare the same setting (softmax
// and linear attention both declare causal), and one flag then serves whichever is chosen.
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tapegrad::nn {

enum class SettingType { integer, real, flag };

/// A setting's value: int64_t for an integer, double for a real, bool for a flag.
using SettingValue = std::variant<int64_t, double, bool>;

/// One setting of a variant, as it declares it.
struct SettingSpec {
  std::string name = {};  // "eps": the config.json key under the component, and (kind.name) the field in messages
  SettingType type = SettingType::real;
  SettingValue default_value = 0.0;  // of the type above: int64_t{2}, 1e-5, false
  // The range of an integer or a real: [min, max], an end open when said. An integer's end at infinity is
  // unbounded; a real declares both ends, each held by float32 (register_component refuses another), and
  // chooses them so that no value inside leaves the layer's output independent of its input. max_setting:
  // the upper end is another integer setting of the same variant (moe's experts per token at most its
  // experts), in addition to max.
  double min = -std::numeric_limits<double>::infinity(), max = std::numeric_limits<double>::infinity();
  bool min_open = false, max_open = false;
  std::string max_setting = {};
  std::string help = {};  // one line: what it does
  // The command-line flag; empty: "--" + name with '_' -> '-', or the flag an earlier variant of the kind
  // declared for the same setting.
  std::string flag = {};
  // Whether it changes the weights' shapes or what the model computes. False only for a training-only setting
  // (moe's load-balancing weight): `train --init` accepts those, and refuses the others (the checkpoint's).
  bool changes_model = true;
  // The top-level config.json key under which older checkpoints kept this setting, before settings were
  // declared ("layer_norm_eps" for layernorm's eps); empty for none. An older file's key is read onto the
  // chosen variant's setting, and dropped when that variant does not declare it (it had no effect there).
  std::string old_key = {};
};

/// "integer", "real" or "flag".
const char* setting_type_name(SettingType type);
/// A value as messages, config.json and --help show it: 2, 1e-05, true.
std::string format_setting(const SettingValue& value);
/// The range as docs/checkpoints.md and --help show it: "[1, 1024]", "(0, inf)", "[1, experts]"; "" for a flag.
std::string range_text(const SettingSpec& spec);
/// "--" + name with '_' -> '-' ("attention_eps" -> "--attention-eps").
std::string derived_flag(const std::string& name);

/// The settings given for the chosen variants, by kind ("norm") and name ("eps"). A setting not given
/// reads as its declared default; nn::validate refuses a setting the chosen variant of its kind does not
/// declare, a value of the wrong type, and one outside the declared range.
class ComponentSettings {
 public:
  using Values = std::map<std::string, std::map<std::string, SettingValue>>;

  void set(const std::string& kind, const std::string& name, SettingValue value) { values_[kind][name] = value; }
  /// Back to the declared default.
  void erase(const std::string& kind, const std::string& name);
  /// The value given, or null.
  const SettingValue* find(const std::string& kind, const std::string& name) const;
  const Values& values() const { return values_; }
  bool operator==(const ComponentSettings&) const = default;

 private:
  Values values_;
};

/// The settings of one chosen variant: its declarations and the values given. The variant reads its own
/// through the typed getters, which fall back to the declared default; a name it does not declare, or a
/// getter of the wrong type, is a ValueError (a bug in the variant, named).
class VariantSettings {
 public:
  /// what: "ffn 'moe'", for messages.
  VariantSettings(std::string kind, std::string what, const std::vector<SettingSpec>& specs,
                  const ComponentSettings& values);

  int64_t integer(const std::string& name) const;
  double real(const std::string& name) const;
  bool flag(const std::string& name) const;
  /// Whether the variant declares this setting.
  bool declares(const std::string& name) const;
  /// Every declared setting with its value (given or default), in declaration order.
  std::vector<std::pair<const SettingSpec*, SettingValue>> all() const;

 private:
  const SettingValue& value(const std::string& name, SettingType type) const;

  std::string kind_, what_;
  const std::vector<SettingSpec>* specs_;
  const ComponentSettings* values_;
};

/// How messages name a field: the library's own name ("norm.eps"), or the command line's ("--norm-eps").
using FieldNames = std::function<std::string(std::string_view field)>;
/// How a message names one setting: "d_model = 3" in the library's words, "--d-model 3" in a flag's (a value ""
/// names a flag that is on, as --causal, by its name alone).
std::string describe(const std::string& name, const std::string& value);

/// One kind's chosen variant, for validate_settings: ("ffn", "moe", its declarations).
struct ChosenVariant {
  std::string kind, variant;
  const std::vector<SettingSpec>* specs;
};

/// Checks the given settings against the declarations of the chosen variants and throws a ValueError
/// "<prefix><what is wrong>" for the first bad one, naming fields as `names` does (the field of a setting is
/// "<kind>.<name>"):
///   a kind that is not one of `chosen`;  a setting of a variant not chosen ("attention.eps applies to
///   attention = linear only, not attention = softmax");  a setting no variant of the kind declares;  a value
///   of the wrong type;  an integer outside its range ("<kind>.<name> = 5 is outside [1, 4]", an upper end
///   that is another setting named with its value);  a real that is not finite or outside its range
///   ("norm.eps must be a finite number in (0, 1], got 0"), or that float32 holds as 0 ("norm.eps = 1e-50 is 0
///   or a denormal in float32, ...").
void validate_settings(const ComponentSettings& values, const std::vector<ChosenVariant>& chosen,
                       const std::string& prefix, const FieldNames& names);

}  // namespace tapegrad::nn
