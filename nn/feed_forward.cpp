#include "nn/feed_forward.h"

#include "autograd/registry.h"

namespace tapegrad::nn {

namespace {
const FeedForwardOptions& checked(const FeedForwardOptions& options) {
  if (options.d_model <= 0 || options.d_ff <= 0)
    throw ValueError(
        cat("FeedForward: d_model and d_ff must be positive, got ", options.d_model, " and ", options.d_ff));
  return options;
}
}  // namespace

FeedForward::FeedForward(const FeedForwardOptions& options, Generator& gen, std::shared_ptr<Generator> dropout_rng)
    : options_(checked(options)),
      linear1_(&register_module("linear1", std::make_unique<Linear>(options.d_model, options.d_ff, true, gen))),
      dropout_(&register_module("dropout", std::make_unique<Dropout>(options.dropout, std::move(dropout_rng)))),
      linear2_(&register_module("linear2", std::make_unique<Linear>(options.d_ff, options.d_model, true, gen))) {}

Tensor FeedForward::forward(const Tensor& x) const {
  const ScopeName scope = enter_scope();
  const Tensor hidden = linear1_->forward(x, options_.activation);  // (..., F)
  return linear2_->forward(dropout_->forward(hidden));                        // (..., C)
}

namespace {
// Built from a fixed seed and converted to the check's dtype (float64 by default); dropout 0, checks x and
// every named parameter. With this seed every pre-activation of the relu case is at least 0.08 from the
// kink, far beyond what a central-difference step (1e-6 in float64, 1e-3 in float32) moves it.
GradcheckCase feed_forward_case(std::string name, Activation activation) {
  return {std::move(name), [activation](const GradcheckOptions& options) {
            Generator gen(617);
            FeedForward layer({.d_model = 4, .d_ff = 6, .activation = activation, .dropout = 0.0}, gen, nullptr);
            layer.to(options.dtype);
            std::vector<Tensor> inputs{randn({2, 3, 4}, gen, options.dtype).requires_grad_()};
            std::vector<std::string> names{"x"};
            for (const auto& [param_name, param] : layer.named_parameters()) {
              inputs.push_back(param);
              names.push_back(param_name);
            }
            const TensorFn fn = [&layer](const std::vector<Tensor>& in) { return layer.forward(in[0]); };
            return gradcheck(fn, inputs, options, names);
          }};
}

const bool registered = register_gradchecks({
    feed_forward_case("nn/feed_forward/relu", Activation::relu),
    feed_forward_case("nn/feed_forward/gelu", Activation::gelu),
});
}  // namespace

}  // namespace tapegrad::nn
