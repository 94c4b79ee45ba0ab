#include "nn/components.h"

#include <algorithm>
#include <deque>

#include "autograd/error.h"

namespace tapegrad::nn {

namespace {

/// One list per kind, created on first use: registrations run while the libraries and the user's program
/// load, in an order no one controls, so the list cannot be a namespace-scope object. A deque, so that
/// the entry a module keeps a reference to stays where it is when more are registered.
template <class Kind>
std::deque<typename Kind::Entry>& entries() {
  static std::deque<typename Kind::Entry> all;
  return all;
}

template <class Entry>
bool complete(const Entry& e) {
  if constexpr (requires { e.apply; })
    return static_cast<bool>(e.apply);
  else
    return e.make && e.parameter_count;
}

}  // namespace

template <class Kind>
bool register_component(typename Kind::Entry entry) {
  if (entry.name.empty()) throw ValueError(cat("register_component: a ", Kind::kName, " needs a name"));
  if (!complete(entry))
    throw ValueError(cat(
        "register_component: ", Kind::kName, " '", entry.name, "' lacks ",
        requires { entry.apply; } ? "apply" : "make or parameter_count"));
  auto& all = entries<Kind>();
  if (std::any_of(all.begin(), all.end(), [&](const auto& e) { return e.name == entry.name; }))
    throw ValueError(cat("register_component: ", Kind::kName, " '", entry.name, "' is registered twice"));
  all.push_back(std::move(entry));
  return true;
}

template <class Kind>
const typename Kind::Entry& component(const std::string& name) {
  for (const auto& e : entries<Kind>())
    if (e.name == name) return e;
  throw ValueError(cat("unknown ", Kind::kName, " '", name, "' (registered: ", component_choices<Kind>(), ")"));
}

template <class Kind>
std::vector<std::string> component_names() {
  std::vector<std::string> names;
  for (const auto& e : entries<Kind>()) names.push_back(e.name);
  return names;
}

template <class Kind>
std::string component_choices() {
  const std::vector<std::string> names = component_names<Kind>();
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return text.empty() ? "none" : text;
}

#define TAPEGRAD_COMPONENT_KIND(Kind)                              \
  template bool register_component<Kind>(Kind::Entry);             \
  template const Kind::Entry& component<Kind>(const std::string&); \
  template std::vector<std::string> component_names<Kind>();       \
  template std::string component_choices<Kind>();
TAPEGRAD_COMPONENT_KIND(PositionalKind)
TAPEGRAD_COMPONENT_KIND(AttentionKind)
TAPEGRAD_COMPONENT_KIND(NormKind)
TAPEGRAD_COMPONENT_KIND(FeedForwardKind)
TAPEGRAD_COMPONENT_KIND(PoolKind)
TAPEGRAD_COMPONENT_KIND(ActivationKind)
#undef TAPEGRAD_COMPONENT_KIND

}  // namespace tapegrad::nn
