#include "nn/settings.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "autograd/dtype.h"
#include "autograd/error.h"
#include "autograd/named_registry.h"
#include "nn/components.h"

namespace tapegrad::nn {

const char* setting_type_name(SettingType type) {
  switch (type) {
    case SettingType::integer: return "integer";
    case SettingType::real: return "real";
    case SettingType::flag: return "flag";
  }
  return "?";
}

std::string format_setting(const SettingValue& value) {
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const int64_t* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  std::ostringstream shown;
  shown << std::get<double>(value);
  return shown.str();
}

namespace {

std::string bound(double v) {
  std::ostringstream shown;
  shown << v;
  return shown.str();
}

}  // namespace

std::string range_text(const SettingSpec& spec) {
  if (spec.type == SettingType::flag) return "";
  const std::string upper = spec.max_setting.empty() ? bound(spec.max) : spec.max_setting;
  return cat(spec.min_open || std::isinf(spec.min) ? "(" : "[", bound(spec.min), ", ", upper,
             (spec.max_open || std::isinf(spec.max)) && spec.max_setting.empty() ? ")" : "]");
}

std::string derived_flag(const std::string& name) {
  std::string flag = "--" + name;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::string describe(const std::string& name, const std::string& value) {
  if (value.empty()) return name;
  return cat(name, name.starts_with("-") ? " " : " = ", value);
}

void ComponentSettings::erase(const std::string& kind, const std::string& name) {
  const auto it = values_.find(kind);
  if (it == values_.end()) return;
  it->second.erase(name);
  if (it->second.empty()) values_.erase(it);
}

const SettingValue* ComponentSettings::find(const std::string& kind, const std::string& name) const {
  const auto it = values_.find(kind);
  if (it == values_.end()) return nullptr;
  const auto value = it->second.find(name);
  return value == it->second.end() ? nullptr : &value->second;
}

VariantSettings::VariantSettings(std::string kind, std::string what, const std::vector<SettingSpec>& specs,
                                 const ComponentSettings& values)
    : kind_(std::move(kind)), what_(std::move(what)), specs_(&specs), values_(&values) {}

bool VariantSettings::declares(const std::string& name) const {
  return std::any_of(specs_->begin(), specs_->end(), [&](const SettingSpec& s) { return s.name == name; });
}

const SettingValue& VariantSettings::value(const std::string& name, SettingType type) const {
  const auto spec = std::find_if(specs_->begin(), specs_->end(), [&](const SettingSpec& s) { return s.name == name; });
  if (spec == specs_->end()) throw ValueError(cat(what_, " declares no setting ", in_quotes(name)));
  if (spec->type != type)
    throw ValueError(cat(what_, ": setting ", in_quotes(name), " is declared ", setting_type_name(spec->type), ", read as ",
                         setting_type_name(type)));
  const SettingValue* given = values_->find(kind_, name);
  if (given && given->index() != spec->default_value.index())
    throw ValueError(cat(what_, ": setting ", in_quotes(name), " = ", format_setting(*given), " is not of type ",
                         setting_type_name(type)));
  return given ? *given : spec->default_value;
}

int64_t VariantSettings::integer(const std::string& name) const {
  return std::get<int64_t>(value(name, SettingType::integer));
}
double VariantSettings::real(const std::string& name) const { return std::get<double>(value(name, SettingType::real)); }
bool VariantSettings::flag(const std::string& name) const { return std::get<bool>(value(name, SettingType::flag)); }

std::vector<std::pair<const SettingSpec*, SettingValue>> VariantSettings::all() const {
  std::vector<std::pair<const SettingSpec*, SettingValue>> out;
  for (const SettingSpec& spec : *specs_) {
    const SettingValue* given = values_->find(kind_, spec.name);
    out.emplace_back(&spec, given ? *given : spec.default_value);
  }
  return out;
}

namespace {

/// The rule a real's range makes, as "must be a finite number <rule>" reads it: "> 0", "in [0, 1)", "".
std::string real_rule(const SettingSpec& spec) {
  const bool low = !std::isinf(spec.min), high = !std::isinf(spec.max);
  if (low && high) return " in " + range_text(spec);
  if (low) return cat(spec.min_open ? " > " : " >= ", bound(spec.min));
  if (high) return cat(spec.max_open ? " < " : " <= ", bound(spec.max));
  return "";
}

bool inside(double v, const SettingSpec& spec) {
  return (spec.min_open ? v > spec.min : v >= spec.min) && (spec.max_open ? v < spec.max : v <= spec.max);
}

/// The ValueError for the first value of `chosen` outside its declared range, if any.
void check_ranges(const std::string& kind, const VariantSettings& chosen, const std::string& prefix,
                  const FieldNames& names) {
  const auto field = [&](const std::string& name) { return names(cat(kind, ".", name)); };
  for (const auto& [spec, value] : chosen.all()) {
    if (spec->type == SettingType::integer) {
      const int64_t v = std::get<int64_t>(value);
      const bool above_setting = !spec->max_setting.empty() && v > chosen.integer(spec->max_setting);
      if (!inside(static_cast<double>(v), *spec) || above_setting) {
        std::string range = range_text(*spec);
        if (!spec->max_setting.empty())  // "[1, --experts 2]": the other setting with its value
          range = cat(range.substr(0, range.size() - spec->max_setting.size() - 1),
                      describe(field(spec->max_setting), cat(chosen.integer(spec->max_setting))), "]");
        throw ValueError(cat(prefix, describe(field(spec->name), cat(v)), " is outside ", range));
      }
    } else if (spec->type == SettingType::real) {
      const double v = std::get<double>(value);
      if (!std::isfinite(v) || !inside(v, *spec))
        throw ValueError(cat(prefix, field(spec->name), " must be a finite number", real_rule(*spec), ", got ", v));
      // Inside a declared range (whose ends float32 holds) only a tiny magnitude can still fail: 1e-50 > 0.
      if (!float32_holds(v)) throw ValueError(cat(prefix, describe(field(spec->name), format_setting(v)), " ", float32_refusal(v)));
    }
  }
}

}  // namespace

void validate_settings(const ComponentSettings& values, const std::vector<ChosenVariant>& chosen,
                       const std::string& prefix, const FieldNames& names) {
  const std::vector<DeclaredSetting> declared = declared_settings();
  for (const auto& [kind_key, given] : values.values()) {
    const std::string& kind = kind_key;  // a structured binding: clang 14 cannot capture one in a lambda
    const auto variant = std::find_if(chosen.begin(), chosen.end(), [&](const ChosenVariant& c) { return c.kind == kind; });
    if (variant == chosen.end()) throw ValueError(cat(prefix, "settings of '", kind, "', which is no component kind"));
    for (const auto& [name_key, value] : given) {
      const std::string& name = name_key;
      const auto declaration = std::find_if(declared.begin(), declared.end(), [&](const DeclaredSetting& d) {
        return d.kind == kind && d.spec.name == name;
      });
      const std::string field = names(cat(kind, ".", name));
      if (declaration == declared.end())
        throw ValueError(cat(prefix, field, ": no ", kind, " declares a setting ", in_quotes(name)));
      const std::vector<std::string>& by = declaration->variants;
      if (std::find(by.begin(), by.end(), variant->variant) == by.end()) {
        throw ValueError(cat(prefix, field, " applies to ", describe(names(kind), choices_text(by)), " only, not ",
                             describe(names(kind), variant->variant)));
      }
      if (value.index() != declaration->spec.default_value.index())
        throw ValueError(cat(prefix, describe(field, format_setting(value)), " must be of type ",
                             setting_type_name(declaration->spec.type)));
    }
  }
  for (const ChosenVariant& c : chosen)
    check_ranges(c.kind, VariantSettings(c.kind, cat(c.kind, " ", in_quotes(c.variant)), *c.specs, values), prefix, names);
}

}  // namespace tapegrad::nn
