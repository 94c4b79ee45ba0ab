#include "train/io/interrupt.h"

#include <signal.h>

#include <cstring>

#include "autograd/error.h"  // cat

namespace tapegrad {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM};

volatile sig_atomic_t g_received = 0;
struct sigaction g_previous[2];
bool g_installed[2] = {false, false};

/// The first signal is recorded for the loop to see; a second one (of either kind) means "now": the
/// default action ends the process, as if no handler had been installed.
extern "C" void on_interrupt(int signal) {
  if (g_received != 0) {
    ::signal(signal, SIG_DFL);
    ::raise(signal);
    return;
  }
  g_received = signal;
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_received = 0;
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a write interrupted by the signal goes on; the loop stops after it
  // sigaction fails only for an invalid signal number or SIGKILL/SIGSTOP, so neither call is checked.
  for (int i = 0; i < 2; ++i) {
    ::sigaction(kSignals[i], nullptr, &g_previous[i]);
    g_installed[i] = g_previous[i].sa_handler != SIG_IGN;
    if (g_installed[i]) ::sigaction(kSignals[i], &action, nullptr);
  }
}

InterruptGuard::~InterruptGuard() {
  for (int i = 0; i < 2; ++i)
    if (g_installed[i]) ::sigaction(kSignals[i], &g_previous[i], nullptr);
}

int InterruptGuard::received() const { return g_received; }

int interrupt_received() { return g_received; }

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return cat("signal ", signal);
}

}  // namespace tapegrad
