// Losses, fused with their softmax so that they are stable and their backward is one pass.
#include "autograd/ops/loss.h"

#include <cmath>

#include "autograd/elementwise_map.h"
#include "autograd/ops/views.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

// cross_entropy.   logits: (N, C) float, targets: (N) int64 -> loss: ()
// Rows whose target is ignore_index are left out; V = the set of the other rows, N_valid = |V|.
// forward : lse_r = m_r + log sum_c exp(x_rc - m_r),  m_r = max_c x_rc   (log-sum-exp, stable)
//           loss = (1/N_valid) sum_{r ∈ V} (lse_r - x_{r,t_r})            = -mean_{r ∈ V} log_softmax(x_r)[t_r]
// gradient: d lse_r / dx_rc = exp(x_rc - lse_r) = softmax(x_r)_c,   d x_{r,t_r} / dx_rc = [c == t_r]
// backward: dx_r = dloss / N_valid · (softmax(x_r) - onehot(t_r))  for r ∈ V;  dx_r = 0 for ignored rows
// saves   : the logits and lse per row (softmax is recomputed as exp(x - lse)), the targets' values
// With every row ignored, N_valid = 0: the loss is 0 and the gradient 0 (PyTorch gives nan), so that a
// batch made only of padding contributes nothing instead of poisoning the parameters.
struct CrossEntropyNode : NodeOf<CrossEntropyNode> {
  static constexpr const char* kName = "cross_entropy";
  Saved logits;  // contiguous (N, C)
  Tensor lse;     // float64 (N); unused for ignored rows. Private to the node, as is:
  Tensor targets;  // a copy of the targets, int64 (N); ignore_index marks an ignored row
  int64_t ignore_index = -100;
  int64_t valid = 0;
  void backward(const Tensor& dloss, BackwardContext& ctx) override {
    if (!ctx.needs_grad(0)) return;
    const Tensor& x = logits.get(kName);
    const int64_t rows = x.shape()[0], classes = x.shape()[1];
    const double scale = valid > 0 ? dloss.item() / static_cast<double>(valid) : 0.0;
    const double* lse_of = lse.data<double>();
    const int64_t* target_of = targets.data<int64_t>();
    ctx.add_into(0, [&](auto dx) {
      using T = typename decltype(dx)::value_type;
      const T* px = x.data<T>();
      const T s = static_cast<T>(scale);
      for (int64_t r = 0; r < rows; ++r) {
        const auto d = dx + r * classes;
        const int64_t t = target_of[r];
        if (t == ignore_index) {  // an ignored row: a zero gradient
          for (int64_t c = 0; c < classes; ++c) d[c] += T(0);
          continue;
        }
        const T* in = px + r * classes;
        for (int64_t c = 0; c < classes; ++c)
          d[c] += static_cast<T>(scale * std::exp(in[c] - lse_of[r])) - (c == t ? s : T(0));
      }
    });
  }
};

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  constexpr const char* op = "cross_entropy";
  if (logits.dim() != 2) throw ShapeError(cat(op, ": logits must be (N, C), got shape ", logits.shape()));
  if (!is_floating(logits.dtype()))
    throw DTypeError(
        cat(op, ": logits ", logits.shape(), " must be float32 or float64, got ", dtype_name(logits.dtype())));
  if (targets.dtype() != DType::int64)
    throw DTypeError(
        cat(op, ": targets ", targets.shape(), " must be int64 class ids, got ", dtype_name(targets.dtype())));
  if (targets.dim() != 1 || targets.shape()[0] != logits.shape()[0])
    throw ShapeError(cat(op, ": targets ", targets.shape(), " do not match logits ", logits.shape(), " (expected [",
                         logits.shape()[0], "])"));
  const int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  const Tensor target_copy = targets.detach().clone();  // contiguous; saved as it is now
  const int64_t* t = target_copy.data<int64_t>();
  int64_t valid = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (t[r] == ignore_index) continue;
    if (t[r] < 0 || t[r] >= classes)
      throw ValueError(cat(op, ": target ", t[r], " at row ", r, " is outside [0, ", classes, ") for logits ",
                           logits.shape(), " (C = ", classes, ", ignore_index = ", ignore_index, ")"));
    ++valid;
  }

  const Tensor x = logits.detach().contiguous();
  Tensor lse_tensor = zeros({rows}, DType::float64);
  double* lse = lse_tensor.data<double>();
  double total = 0;  // sum over valid rows of lse_r - x_{r,t_r}, in double for either dtype
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      if (t[r] == ignore_index) continue;
      const T* in = px + r * classes;
      double m = in[0];
      for (int64_t c = 1; c < classes; ++c) m = in[c] > m ? static_cast<double>(in[c]) : m;
      double s = 0;
      for (int64_t c = 0; c < classes; ++c) s += std::exp(in[c] - m);
      lse[r] = m + std::log(s);
      total += lse[r] - in[t[r]];
    }
  });
  Tensor loss = full({}, valid > 0 ? total / static_cast<double>(valid) : 0.0, logits.dtype());
  if (auto* node = record<CrossEntropyNode>(loss, logits)) {
    node->logits = x;
    node->lse = lse_tensor;
    node->targets = target_copy;
    node->ignore_index = ignore_index;
    node->valid = valid;
  }
  return loss;
}

namespace {
using K = InputSpec::Kind;
const bool registered = register_gradchecks({
    op_case("loss/cross_entropy", {{{4, 5}}, {{4}, K::ids, 5}}, [](auto& in) { return cross_entropy(in[0], in[1]); }),
    // A custom ignore_index that is also a valid class: row 1 (target 2) is ignored, the others count.
    op_case("loss/cross_entropy/ignore-index", {{{4, 5}}},
            [](auto& in) {
              return cross_entropy(in[0], ids({3, 2, 0, 4}, {4}), /*ignore_index=*/2);
            }),
    // The default ignore_index (-100) on row 1, and logits that are a transposed view.
    op_case("loss/cross_entropy/default-ignore-of-transposed", {{{5, 3}}},
            [](auto& in) {
              return cross_entropy(transpose(in[0], 0, 1), ids({1, -100, 4}, {3}));
            }),
});
}  // namespace

}  // namespace tapegrad
