#pragma once
// NamedRegistry: the one way tapegrad chooses a thing by name. Model components (nn/components.h),
// optimizers and learning-rate schedules (optim/), tasks (train/data/tasks.h) and bench configurations
// each keep one registry of their entries; a built-in entry registers itself in the file that defines it,
// exactly as a user's program registers its own:
//   static const bool registered = register_optimizer({.name = "lion", .help = "...", .make = ...});
// The command line offers a registry's names as the choices of its flag and lists them in --help, so a
// user's entry appears there too.
//
// Static-init safety: registrations run while the libraries and the user's program load, in an order no
// one controls, so a registry is never a namespace-scope object. Each owner returns it from a function-local
// static (created on first use):
//   NamedRegistry<OptimizerEntry>& optimizer_registry() { static NamedRegistry<OptimizerEntry> r("optimizer"); return r; }
// Entries live in a deque, so a reference to one stays valid when more are registered.
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "autograd/error.h"

namespace tapegrad {

/// "a, b or c" (one name: "a"; none: "none"), for messages and help texts.
inline std::string choices_text(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return text.empty() ? "none" : text;
}

/// Entries of one kind, chosen by name. Entry is a struct with a `std::string name` member.
template <class Entry>
class NamedRegistry {
 public:
  /// kind names an entry in messages ("optimizer", "learning-rate schedule"); adder names the function that
  /// registers one ("register_optimizer").
  NamedRegistry(std::string kind, std::string adder) : kind_(std::move(kind)), adder_(std::move(adder)) {}
  NamedRegistry(const NamedRegistry&) = delete;
  NamedRegistry& operator=(const NamedRegistry&) = delete;

  /// Adds entry; an empty name or one registered before is a ValueError ("register_optimizer: optimizer 'sgd'
  /// is registered twice"), and nothing is added. Returns true, so that a file registers at load time.
  bool add(Entry entry) {
    if (entry.name.empty()) throw ValueError(cat(adder_, ": a ", kind_, " needs a name"));
    if (find(entry.name)) throw ValueError(cat(adder_, ": ", kind_, " ", in_quotes(entry.name), " is registered twice"));
    entries_.push_back(std::move(entry));
    return true;
  }

  /// The entry registered under name, or nullptr.
  const Entry* find(const std::string& name) const {
    for (const Entry& e : entries_)
      if (e.name == name) return &e;
    return nullptr;
  }

  /// The entry registered under name; otherwise a ValueError, unknown(name).
  const Entry& at(const std::string& name) const {
    if (const Entry* e = find(name)) return *e;
    throw ValueError(unknown(name));
  }

  /// "unknown optimizer 'lion' (registered: sgd, adam or adamw)": the message of a name no loaded code
  /// registered, for callers that put the flag or field in front of it.
  std::string unknown(const std::string& name) const {
    return cat("unknown ", kind_, " ", in_quotes(name), " (registered: ", choices(), ")");
  }

  /// The names in registration order (the built-in ones first).
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const Entry& e : entries_) out.push_back(e.name);
    return out;
  }

  /// "a, b or c".
  std::string choices() const { return choices_text(names()); }

  /// Every entry, in registration order.
  const std::deque<Entry>& entries() const { return entries_; }
  const std::string& kind() const { return kind_; }

 private:
  std::string kind_, adder_;
  std::deque<Entry> entries_;
};

}  // namespace tapegrad
