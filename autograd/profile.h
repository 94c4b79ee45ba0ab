#pragma once
// Where a step's time goes, op by op (`tapegrad bench --profile`). While a profile runs on a thread, the
// tape books the time since its last stamp to each op it records (the op's forward and whatever ran
// since the op before it), each backward rule's time to its op, and a ProfileScope's time to its name
// (the optimizer step, say). Work an op hands to the thread pool is inside the op's time. Off, it costs
// one branch per recorded op.
#include <cstdint>
#include <string>
#include <vector>

namespace tapegrad {

struct Node;

/// One row of a profile: an op of the tape (its node name) or a named phase.
struct OpTimes {
  std::string name;
  int64_t calls = 0;  // forward calls (a phase: its scopes)
  double forward_seconds = 0, backward_seconds = 0;
  double flops = 0;  // products' floating-point operations, forward and backward (Node::flops)
};

/// Starts a profile on this thread (an empty table), or restarts one.
void start_profile();
/// Ends this thread's profile; its rows in order of first appearance. Empty when none ran.
std::vector<OpTimes> stop_profile();
/// True while a profile runs on this thread.
bool profiling();

/// Books the time from its construction to its destruction to `name` (a string literal that outlives
/// the profile), as forward time; the time before it, since the last stamp, goes to "(between ops)".
class ProfileScope {
 public:
  explicit ProfileScope(const char* name);
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  const char* name_;
};

namespace detail {
/// The tape's hooks: an op was recorded; backward is about to run rules; a backward rule has run.
void profile_recorded(const Node& node);
void profile_backward_starts();
void profile_backward_ran(const Node& node);
extern thread_local bool profile_on;
}  // namespace detail

}  // namespace tapegrad
