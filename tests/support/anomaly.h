#pragma once
// The message of the AnomalyError a computation throws, for tests of anomaly detection.
#include <string>

#include "autograd/anomaly.h"

namespace tapegrad::testing {

/// The AnomalyError's message f throws, or a line saying that it threw none.
template <class F>
std::string anomaly_message(F&& f) {
  try {
    f();
  } catch (const AnomalyError& e) {
    return e.what();
  }
  return "(no AnomalyError)";
}

}  // namespace tapegrad::testing
