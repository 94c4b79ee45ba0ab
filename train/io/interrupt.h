#pragma once
// SIGINT and SIGTERM during training: the first one asks the loop to stop at the next step boundary
// (after it writes a checkpoint of that step); a second one ends the process at once, which is safe
// because checkpoints are published atomically (docs/checkpoints.md).
#include <stdexcept>
#include <string>

namespace tapegrad {

/// Catches SIGINT and SIGTERM while it lives (the training loop) and restores the previous handlers
/// when it goes. The handler only records the signal (async-signal-safe); the loop polls it. A signal
/// that was ignored when the guard was made (`nohup`, a background job's SIGINT) stays ignored.
/// One guard at a time per process.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  /// The signal received so far (SIGINT or SIGTERM), or 0.
  int received() const;
};

/// The signal an InterruptGuard received so far, or 0: for code that waits (data-parallel collectives)
/// and must not wait forever once asked to stop.
int interrupt_received();

/// "SIGINT", "SIGTERM", or "signal N".
std::string signal_name(int signal);

/// Thrown by the trainer once it has saved the checkpoint of the step a signal stopped it at. Not an
/// Error: nothing went wrong, and the command line exits with 128 + signal (what a shell reports).
struct Interrupted : std::runtime_error {
  Interrupted(int signal, const std::string& message) : std::runtime_error(message), signal(signal) {}
  int signal;
};

}  // namespace tapegrad
