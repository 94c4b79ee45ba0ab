#pragma once
// The checks every registered component must pass, for the library's own tests and a user's alike: a
// variant whose parameter_count disagrees with what it builds, or that holds parameters no gradient check
// covers, is named here.
#include <string>
#include <vector>

namespace tapegrad::nn {

/// One line per problem with the registered components; empty when there is none. For every variant of
/// every kind, a micro classifier using it is built (vocab 7, d_model 4, 2 heads, d_ff 6, 2 pre-LN layers
/// with a final norm, context 6, 3 classes, float64) and
///   - nn::parameter_count(options) must equal the built model's parameter count;
///   - every module type in it holding parameters of its own must have a module_case (module_gradcheck.h);
///   - its logits for a padded batch of two sequences must be finite, of shape (2, 3).
std::vector<std::string> component_problems();

}  // namespace tapegrad::nn
