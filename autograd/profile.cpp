// The per-thread profile table behind profile.h: rows keyed by the name's address (node names and
// phase names are string literals), a steady clock stamped at each booking.
#include "autograd/profile.h"

#include <chrono>

#include "autograd/tape.h"

namespace tapegrad {

namespace detail {
thread_local bool profile_on = false;
}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;

struct Profile {
  std::vector<const char*> keys;
  std::vector<OpTimes> rows;
  Clock::time_point stamp;
};

thread_local Profile this_threads_profile;

OpTimes& row(const char* name) {
  Profile& p = this_threads_profile;
  for (size_t i = 0; i < p.keys.size(); ++i)
    if (p.keys[i] == name) return p.rows[i];
  p.keys.push_back(name);
  p.rows.push_back(OpTimes{.name = name});
  return p.rows.back();
}

/// The seconds since the last stamp; stamps now.
double lap() {
  const Clock::time_point now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - this_threads_profile.stamp).count();
  this_threads_profile.stamp = now;
  return seconds;
}

constexpr const char* kBetweenOps = "(between ops)";

}  // namespace

void start_profile() {
  this_threads_profile = Profile{};
  this_threads_profile.stamp = Clock::now();
  detail::profile_on = true;
}

std::vector<OpTimes> stop_profile() {
  detail::profile_on = false;
  std::vector<OpTimes> rows = std::move(this_threads_profile.rows);
  this_threads_profile = Profile{};
  return rows;
}

bool profiling() { return detail::profile_on; }

ProfileScope::ProfileScope(const char* name) : name_(name) {
  if (detail::profile_on) row(kBetweenOps).forward_seconds += lap();
}

ProfileScope::~ProfileScope() {
  if (!detail::profile_on) return;
  OpTimes& phase = row(name_);
  phase.forward_seconds += lap();
  ++phase.calls;
}

namespace detail {

void profile_recorded(const Node& node) {
  OpTimes& op = row(node.name());
  op.forward_seconds += lap();
  op.flops += node.flops();
  ++op.calls;
}

void profile_backward_starts() { row(kBetweenOps).forward_seconds += lap(); }

void profile_backward_ran(const Node& node) {
  OpTimes& op = row(node.name());
  op.backward_seconds += lap();
  op.flops += 2 * node.flops();  // a product's backward is two products of its size
}

}  // namespace detail

}  // namespace tapegrad
