#pragma once
// Gradient checks of layers. Every layer registers its cases through module_case, as ops register theirs
// through op_case (autograd/registry.h), and module_case notes the layer's type as checked, so that
// nn::component_problems() can name any module type holding parameters of its own that no case checks:
// a layer cannot land, or be registered by a user, without a gradient check.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include "autograd/registry.h"
#include "nn/module.h"

namespace tapegrad::nn {

/// Notes that module type `type` has a gradcheck case (module_case does it when the case is made).
void note_module_checked(const std::type_info& type);
/// Whether some module_case was made for this type.
bool module_checked(const std::type_info& type);
/// The readable (demangled) name of a type, for messages: "tapegrad::nn::LayerNorm".
std::string type_name(const std::type_info& type);

/// An input of a module_case: its name in the report and its shape.
struct CheckedInput {
  std::string name;
  Shape shape;
};

/// A gradcheck case over a layer: build(gen) makes the module from Generator(seed) and it is converted to
/// the check's dtype (float64 by default); then each input is drawn ~N(0, 1) from gen in that dtype, in
/// order. The check covers every input and every named parameter, reported by name; run(module, inputs)
/// is the function checked (a module fed ids has no inputs and keeps its ids in run). Notes M as checked.
template <class M>
GradcheckCase module_case(std::string name, std::function<std::unique_ptr<M>(Generator&)> build,
                          std::vector<CheckedInput> checked_inputs,
                          std::function<Tensor(const M&, const std::vector<Tensor>&)> run, uint64_t seed = 307) {
  note_module_checked(typeid(M));
  return {std::move(name), [build, checked_inputs, run, seed](const GradcheckOptions& check) {
            Generator gen(seed);
            const std::unique_ptr<M> module = build(gen);
            module->to(check.dtype);
            std::vector<Tensor> inputs;
            std::vector<std::string> names;
            for (const CheckedInput& input : checked_inputs) {
              inputs.push_back(randn(input.shape, gen, check.dtype).requires_grad_());
              names.push_back(input.name);
            }
            for (const auto& [param_name, param] : module->named_parameters()) {
              inputs.push_back(param);
              names.push_back(param_name);
            }
            const size_t n_inputs = checked_inputs.size();
            const M& layer = *module;
            const TensorFn fn = [&layer, &run, n_inputs](const std::vector<Tensor>& in) {
              return run(layer, std::vector<Tensor>(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n_inputs)));
            };
            return gradcheck(fn, inputs, check, names);
          }};
}

}  // namespace tapegrad::nn
