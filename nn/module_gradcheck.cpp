#include "nn/module_gradcheck.h"

#include <cxxabi.h>

#include <cstdlib>
#include <set>
#include <typeindex>

namespace tapegrad::nn {

namespace {
std::set<std::type_index>& checked_types() {
  static std::set<std::type_index> all;  // filled while the libraries load: created on first use
  return all;
}
}  // namespace

void note_module_checked(const std::type_info& type) { checked_types().insert(type); }

bool module_checked(const std::type_info& type) { return checked_types().count(type) > 0; }

std::string type_name(const std::type_info& type) {
  int status = 0;
  char* readable = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && readable ? readable : type.name();
  std::free(readable);
  return name;
}

}  // namespace tapegrad::nn
