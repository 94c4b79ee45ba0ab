#pragma once
// The registry of gradient checks. Every node kind registers itself when the library loads (NodeOf does
// it); every op and layer registers gradcheck cases next to its code. The registry test fails for a node
// kind that no case exercises, so a new op cannot land untested; `tapegrad gradcheck` runs them all.
#include <functional>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/random.h"

namespace tapegrad {

/// Every node kind that exists, sorted.
std::vector<std::string> node_kinds();

/// How a gradcheck input is generated (always away from kinks, ties and poles of the op it feeds).
struct InputSpec {
  enum class Kind {
    normal,    // standard normal
    positive,  // uniform in [0.5, 2): log, sqrt, pow, divisors
    apart,     // |x| in [0.2, 1.2) with random sign, distinct values: relu, max (no kinks or ties)
    ids,       // int64 uniform in [0, limit): embedding ids, class targets
    mask,      // bool, true with probability 0.3
  };
  Shape shape;
  Kind kind = Kind::normal;
  int64_t limit = 0;  // ids only
  bool requires_grad = true;
};

/// Makes the inputs of a spec list in `dtype` (ids and masks keep their own dtype).
std::vector<Tensor> make_inputs(const std::vector<InputSpec>& specs, Generator& gen, DType dtype = DType::float64);

struct GradcheckCase {
  std::string name;  // "family/op/variant", e.g. "elementwise/mul/broadcast-both"
  std::function<GradcheckResult(const GradcheckOptions&)> run;
};

/// The usual case: inputs from specs (in options.dtype), checked through fn.
GradcheckCase op_case(std::string name, std::vector<InputSpec> specs, TensorFn fn);

/// Adds cases; returns true so that a file can register at load time:
///   static const bool registered = register_gradchecks({op_case(...), ...});
bool register_gradchecks(std::vector<GradcheckCase> cases);
/// Every case registered so far: the library's, and those of any program or library that registered its
/// own (a user's ops and layers join the same list, so `tapegrad gradcheck` in their program runs them).
const std::vector<GradcheckCase>& gradcheck_cases();

/// The node kinds that no registered case records on its tape, sorted: runs every case once in float64.
/// Empty means every op is gradient-checked. A user's test demands it for their own kinds:
///   for (auto& kind : node_kinds_without_case()) CHECK(kind.rfind("my_", 0) != 0);
std::vector<std::string> node_kinds_without_case();

}  // namespace tapegrad
