#include "nn/components.h"

#include <algorithm>
#include <cmath>

#include "autograd/dtype.h"
#include "autograd/error.h"
#include "autograd/named_registry.h"
#include "nn/module_gradcheck.h"

namespace tapegrad::nn {

namespace {

/// One registry per kind (autograd/named_registry.h), created on first use.
template <class Kind>
NamedRegistry<typename Kind::Entry>& registry() {
  static NamedRegistry<typename Kind::Entry> all(Kind::kName, "register_component");
  return all;
}

template <class Kind>
const std::deque<typename Kind::Entry>& entries() {
  return registry<Kind>().entries();
}

template <class Entry>
bool complete(const Entry& e) {
  if constexpr (requires { e.apply; })
    return static_cast<bool>(e.apply);
  else
    return e.make && e.parameter_count;
}

/// A real's declared range is where the variant computes with it: both ends given and held by float32, so that
/// no admitted value is infinite there, 0 in place of a tiny eps, or so large that it leaves the layer's output
/// independent of its input (an eps of 1e30 normalises every row to its bias).
void check_real_range(const std::string& setting, const SettingSpec& spec) {
  if (!float32_holds(spec.min) || !float32_holds(spec.max))
    throw ValueError(cat(setting, ": a real declares both ends of its range, each held by float32 (0 or a magnitude "
                                  "in about [1.2e-38, 3.4e38]), not ", range_text(spec)));
}

/// The ValueError for a bad settings declaration of `variant` (a variant of `kind`), if any; fills in each
/// setting's flag (the one an earlier variant of the kind declared for it, or the derived one).
void check_settings_declaration(const std::string& kind, const std::string& variant, std::vector<SettingSpec>& specs) {
  const std::string what = cat("register_component: ", kind, " '", variant, "'");
  const std::vector<DeclaredSetting> declared = declared_settings();
  for (SettingSpec& spec : specs) {
    const std::string setting = cat(what, ": setting '", spec.name, "'");
    if (spec.name.empty() || spec.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
      throw ValueError(cat(setting, " needs a name of lower-case letters, digits and '_'"));
    if (std::count_if(specs.begin(), specs.end(), [&](const SettingSpec& s) { return s.name == spec.name; }) > 1)
      throw ValueError(cat(setting, " is declared twice"));
    if (static_cast<size_t>(spec.type) != spec.default_value.index())
      throw ValueError(cat(setting, " is ", setting_type_name(spec.type), " but its default ",
                           format_setting(spec.default_value), " is not"));
    const auto earlier = std::find_if(declared.begin(), declared.end(), [&](const DeclaredSetting& d) {
      return d.kind == kind && d.spec.name == spec.name;
    });
    if (spec.flag.empty()) spec.flag = earlier != declared.end() ? earlier->spec.flag : derived_flag(spec.name);
    if (!spec.flag.starts_with("--")) throw ValueError(cat(setting, ": flag '", spec.flag, "' must start with --"));
    if (earlier != declared.end() && spec.old_key.empty()) spec.old_key = earlier->spec.old_key;
    if (earlier != declared.end() && (earlier->spec.type != spec.type || earlier->spec.flag != spec.flag ||
                                      earlier->spec.changes_model != spec.changes_model ||
                                      earlier->spec.old_key != spec.old_key))
      throw ValueError(cat(setting, " differs in type, flag, changes_model or old_key from ", kind, " '",
                           earlier->variants.front(), "''s, which shares its flag ", earlier->spec.flag));
    for (const DeclaredSetting& d : declared) {
      if (d.kind == kind && d.spec.name == spec.name) continue;
      if (d.spec.flag == spec.flag) throw ValueError(cat(setting, ": flag ", spec.flag, " is ", d.kind, ".", d.spec.name, "'s"));
      if (!spec.old_key.empty() && d.spec.old_key == spec.old_key)
        throw ValueError(cat(setting, ": old_key '", spec.old_key, "' is ", d.kind, ".", d.spec.name, "'s"));
    }
    if (spec.type == SettingType::flag) continue;
    const double v = spec.type == SettingType::integer ? static_cast<double>(std::get<int64_t>(spec.default_value))
                                                       : std::get<double>(spec.default_value);
    const bool in_range = std::isfinite(v) && (spec.min_open ? v > spec.min : v >= spec.min) &&
                          (spec.max_open ? v < spec.max : v <= spec.max);
    if (!in_range)
      throw ValueError(cat(setting, ": default ", format_setting(spec.default_value), " is outside ", range_text(spec)));
    if (spec.type == SettingType::real) check_real_range(setting, spec);
    if (spec.max_setting.empty()) continue;
    const auto bound = std::find_if(specs.begin(), specs.end(), [&](const SettingSpec& s) { return s.name == spec.max_setting; });
    if (spec.type != SettingType::integer || bound == specs.end() || bound->type != SettingType::integer ||
        bound->default_value.index() != 0)
      throw ValueError(cat(setting, ": max_setting '", spec.max_setting, "' is not an integer setting of ", variant));
    if (std::get<int64_t>(spec.default_value) > std::get<int64_t>(bound->default_value))
      throw ValueError(cat(setting, ": default ", format_setting(spec.default_value), " is above ", spec.max_setting,
                           "'s default ", format_setting(bound->default_value)));
  }
}

}  // namespace

std::pair<Tensor, Tensor> PositionalEncoding::rotate_query_key_from(const Tensor& q, const Tensor& k, int64_t q_start,
                                                                    int64_t k_start) const {
  if (q_start == 0 && k_start == 0) return rotate_query_key(q, k);
  if (!acts_in_attention()) return {q, k};
  throw ValueError(cat("positional encoding ", type_name(typeid(*this)), " rotates q and k from position 0 only: it does not "
                       "override rotate_query_key_from, which generation with a KV cache needs"));
}

Tensor PositionalEncoding::attention_bias_from(int64_t n_heads, int64_t T_q, int64_t T_k, int64_t q_start,
                                               int64_t k_start, DType dtype) const {
  if (q_start == 0 && k_start == 0) return attention_bias(n_heads, T_q, T_k, dtype);
  if (!acts_in_attention()) return {};
  throw ValueError(cat("positional encoding ", type_name(typeid(*this)), " biases scores from position 0 only: it does not "
                       "override attention_bias_from, which generation with a KV cache needs"));
}

Tensor SelfAttention::attend_cached(const Tensor&, KeyValueCache&, const PositionalEncoding*) const {
  throw ValueError(cat("attention ", type_name(typeid(*this)), " keeps no KV cache (supports_kv_cache is false)"));
}

template <class Kind>
bool register_component(typename Kind::Entry entry) {
  if (!entry.name.empty() && !complete(entry))
    throw ValueError(cat(
        "register_component: ", Kind::kName, " '", entry.name, "' lacks ",
        requires { entry.apply; } ? "apply" : "make or parameter_count"));
  // The name first (empty, registered before), so that a second registration is named as one.
  if (!entry.name.empty() && !registry<Kind>().find(entry.name))
    check_settings_declaration(Kind::kName, entry.name, entry.settings);
  return registry<Kind>().add(std::move(entry));
}

template <class Kind>
const typename Kind::Entry& component(const std::string& name) {
  return registry<Kind>().at(name);
}

template <class Kind>
std::vector<std::string> component_names() {
  return registry<Kind>().names();
}

template <class Kind>
std::string component_choices() {
  return registry<Kind>().choices();
}

template <class Kind>
VariantSettings settings_of(const ComponentSettings& values, const std::string& variant) {
  return VariantSettings(Kind::kName, cat(Kind::kName, " ", in_quotes(variant)), component<Kind>(variant).settings, values);
}

std::vector<DeclaredSetting> declared_settings() {
  std::vector<DeclaredSetting> out;
  for_each_kind([&out]<class Kind>(std::type_identity<Kind>) {
    for (const auto& e : entries<Kind>())
      for (const SettingSpec& spec : e.settings) {
        const auto same = std::find_if(out.begin(), out.end(), [&](const DeclaredSetting& d) {
          return d.kind == Kind::kName && d.spec.name == spec.name;
        });
        if (same != out.end())
          same->variants.push_back(e.name);
        else
          out.push_back({Kind::kName, {e.name}, spec});
      }
  });
  return out;
}

std::vector<VariantSetting> settings_by_variant() {
  std::vector<VariantSetting> out;
  for_each_kind([&out]<class Kind>(std::type_identity<Kind>) {
    for (const auto& e : entries<Kind>())
      for (const SettingSpec& spec : e.settings) out.push_back({Kind::kName, e.name, spec});
  });
  return out;
}

std::string setting_flag(std::string_view field) {
  for (const DeclaredSetting& d : declared_settings())
    if (field == cat(d.kind, ".", d.spec.name)) return d.spec.flag;
  return "";
}

#define TAPEGRAD_COMPONENT_KIND(Kind)                                                                  \
  template bool register_component<Kind>(Kind::Entry);                                                 \
  template const Kind::Entry& component<Kind>(const std::string&);                                     \
  template std::vector<std::string> component_names<Kind>();                                           \
  template std::string component_choices<Kind>();                                                      \
  template VariantSettings settings_of<Kind>(const ComponentSettings&, const std::string&);
TAPEGRAD_COMPONENT_KIND(PositionalKind)
TAPEGRAD_COMPONENT_KIND(AttentionKind)
TAPEGRAD_COMPONENT_KIND(NormKind)
TAPEGRAD_COMPONENT_KIND(FeedForwardKind)
TAPEGRAD_COMPONENT_KIND(PoolKind)
TAPEGRAD_COMPONENT_KIND(ActivationKind)
#undef TAPEGRAD_COMPONENT_KIND

}  // namespace tapegrad::nn
