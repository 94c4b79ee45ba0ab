#include "nn/dropout.h"

#include "autograd/gradcheck.h"
#include "autograd/ops/dropout.h"
#include "autograd/registry.h"

namespace tapegrad::nn {

Dropout::Dropout(double p, std::shared_ptr<Generator> rng) : p_(p), rng_(std::move(rng)) {
  if (!(p >= 0 && p < 1)) throw ValueError(cat("Dropout: p must be in [0, 1), got ", p));
  if (p > 0 && !rng_) throw ValueError(cat("Dropout: p = ", p, " needs a generator, got a null rng"));
}

Tensor Dropout::forward(const Tensor& x) const {
  const ScopeName scope = enter_scope();
  if (!is_training() || p_ == 0) return x;
  return dropout(x, p_, /*training=*/true, *rng_);
}

namespace {
// The mask must be the same on every evaluation of the gradcheck, so the function restores the shared
// stream's state before each call, as a trainer restoring a checkpoint would. In the check's dtype.
const bool registered = register_gradchecks({
    {"nn/dropout/training-p0.5",
     [](const GradcheckOptions& options) {
       auto rng = std::make_shared<Generator>(505);
       const Generator::State start = rng->state();
       Dropout layer(0.5, rng);
       Generator gen(options.seed);
       const Tensor x = randn({3, 4}, gen, options.dtype).requires_grad_();
       const TensorFn fn = [&layer, rng, start](const std::vector<Tensor>& in) {
         rng->set_state(start);
         return layer.forward(in[0]);
       };
       return gradcheck(fn, {x}, options, {"x"});
     }},
});
}  // namespace

}  // namespace tapegrad::nn
