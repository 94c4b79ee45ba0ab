#include "nn/components.h"

#include "autograd/error.h"
#include "autograd/named_registry.h"

namespace tapegrad::nn {

namespace {

/// One registry per kind (autograd/named_registry.h), created on first use.
template <class Kind>
NamedRegistry<typename Kind::Entry>& registry() {
  static NamedRegistry<typename Kind::Entry> all(Kind::kName, "register_component");
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
  if (!entry.name.empty() && !complete(entry))
    throw ValueError(cat(
        "register_component: ", Kind::kName, " '", entry.name, "' lacks ",
        requires { entry.apply; } ? "apply" : "make or parameter_count"));
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
