// Matrix products.   a: (..., M, K), b: (..., K, N) -> out: (..., M, N)
// The products run on BLAS through autograd/kernels/gemm.h (in-place strided reads, broadcast batches,
// the split across threads); this file is the math, the shapes and the folding of batches into rows.
#include "autograd/ops/matmul.h"

#include <optional>

#include "autograd/elementwise_map.h"
#include "autograd/kernels/gemm.h"
#include "autograd/ops/unary.h"
#include "autograd/ops/views.h"
#include "autograd/pool.h"
#include "autograd/parallel.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

namespace {

/// t itself when BLAS can read its matrices in place, else a contiguous copy (not recorded: the caller
/// records the product against the original tensor).
Tensor blas_readable(const Tensor& t) {
  if (blas_layout(t)) return t;
  NoGradGuard no_grad;
  return t.clone();
}

Shape batch_of(const Shape& s) {
  Shape batch = s;
  batch.erase(batch.rank() - 1);
  batch.erase(batch.rank() - 1);
  return batch;
}

/// A view of t's storage with this shape and these strides, `skip` elements past t's offset.
Tensor view_of(const Tensor& t, const Shape& shape, const Shape& strides, int64_t skip = 0) {
  auto impl = make_pooled<TensorImpl>();
  impl->storage = t.storage();
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = t.offset() + skip;
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

/// a (..., K) as one (R, K) matrix of R = numel / K rows, sharing a's storage, when its rows are evenly
/// spaced through all the leading dims with unit column stride (a contiguous (B, T, C) activation, or a
/// slice of one's last dim); std::nullopt otherwise. Then a batch of products with one shared b is a
/// single gemm (R, K) @ (K, N): one large product instead of B small ones, which BLAS runs far faster,
/// and its backward likewise (db = aᵀ dout becomes one product with inner dim R, instead of B products
/// of inner dim M added one after another).
std::optional<Tensor> rows_view(const Tensor& a) {
  const int r = a.dim();
  if (r < 1) return std::nullopt;
  const int64_t K = a.shape()[r - 1];
  if (K != 1 && a.strides()[r - 1] != 1) return std::nullopt;
  int64_t rows = 1, row_stride = -1;
  for (int i = r - 2; i >= 0; --i) {
    const int64_t n = a.shape()[i];
    if (n == 1) continue;
    if (row_stride < 0) row_stride = a.strides()[i];  // the innermost dim of size > 1 sets the spacing
    else if (a.strides()[i] != row_stride * rows) return std::nullopt;
    rows *= n;
  }
  const int64_t min_ld = std::max<int64_t>(K, 1);  // BLAS needs a leading dim >= the row length
  if (rows <= 1) row_stride = min_ld;
  if (row_stride < min_ld) return std::nullopt;
  return view_of(a, Shape{rows, K}, Shape{row_stride, 1});
}

}  // namespace

// matmul.  a: (..., M, K), b: (..., K, N) -> out: (..., M, N)
// forward : out[i,j] = sum_k a[i,k] b[k,j]           (per batch index, batch dims broadcast)
// backward: da = dout @ bᵀ,  db = aᵀ @ dout           (summed over the batch dims each operand was
//           broadcast along; gemm's beta is the gradient buffer's: 0 assigns into a new one, 1 adds)
// saves   : a, b as the (possibly strided) views BLAS reads
//           When b has no batch dims and a's rows fold into one matrix (rows_view), a is saved as that
//           (R, K) matrix and all three products are single 2-D gemms over the R = numel(a) / K rows.
namespace {
/// The FLOPs of a node's (..., M, K) @ (K, N) product, its first input being the (..., M, K) operand:
/// 2·K per output element.
double product_flops(const Node& node) {
  return 2.0 * static_cast<double>(node.out_shape.numel()) * static_cast<double>(node.inputs[0].shape.back());
}
}  // namespace

struct MatmulNode : NodeOf<MatmulNode> {
  static constexpr const char* kName = "matmul";
  Saved a, b;
  Shape batch;
  bool folded = false;  // a is saved as its (R, K) rows_view; dout and da are seen as (R, N) and (R, K)
  double flops() const override { return product_flops(*this); }
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    const Tensor &av = a.get(kName), &bv = b.get(kName);
    const Tensor g = folded ? view_of(dout, Shape{av.shape()[0], dout.shape().back()},
                                      Shape{dout.shape().back(), 1})
                            : dout;  // dout is contiguous
    // A gradient whose batch dims were broadcast sums several products: scattered, so its beta is 1.
    auto adds = [&](size_t k) { return shares_slices(inputs[k].shape, batch) ? Adds::scattered : Adds::each_once; };
    ctx.add_into(0, [&](auto da) {  // da = dout @ bᵀ
      Tensor da_view = folded ? view_of(da.tensor, av.shape(), contiguous_strides(av.shape())) : da.tensor;
      batched_gemm(g, false, bv, true, da_view, batch, da.beta);
    }, adds(0));
    ctx.add_into(1, [&](auto db) { batched_gemm(av, true, g, false, db.tensor, batch, db.beta); }, adds(1));  // db = aᵀ @ dout
  }
};

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  if (a_in.dim() == 0 || b_in.dim() == 0)
    throw ShapeError(cat("matmul: ", a_in.shape(), " @ ", b_in.shape(), ": operands must have at least 1 dim"));
  // Vectors as in torch.matmul: a (K) is a row (1, K), b (K) a column (K, 1); that dim is dropped after.
  if (a_in.dim() == 1 && b_in.dim() == 1) return reshape(matmul(unsqueeze(a_in, 0), unsqueeze(b_in, -1)), {});
  if (a_in.dim() == 1) return squeeze(matmul(unsqueeze(a_in, 0), b_in), -2);
  if (b_in.dim() == 1) return squeeze(matmul(a_in, unsqueeze(b_in, -1)), -1);
  check_same_float(a_in, b_in, "matmul");
  const int64_t k_a = a_in.shape()[a_in.dim() - 1], k_b = b_in.shape()[b_in.dim() - 2];
  if (k_a != k_b)
    throw ShapeError(cat("matmul: ", a_in.shape(), " @ ", b_in.shape(), ": inner dims ", k_a, " and ", k_b, " differ"));
  Shape batch;
  try {
    batch = broadcast_shapes(batch_of(a_in.shape()), batch_of(b_in.shape()), "matmul");
  } catch (const ShapeError&) {
    throw ShapeError(cat("matmul: ", a_in.shape(), " @ ", b_in.shape(), ": batch dims ", batch_of(a_in.shape()),
                         " and ", batch_of(b_in.shape()), " do not broadcast"));
  }
  const Tensor a = blas_readable(a_in), b = blas_readable(b_in);
  Shape out_shape = batch;
  out_shape.push_back(a.shape()[a.dim() - 2]);
  out_shape.push_back(b.shape()[b.dim() - 1]);
  Tensor out = empty(out_shape, a.dtype());
  // A batch of products with one 2-D b (a Linear layer on (B, T, C)) is one product of a's rows.
  const std::optional<Tensor> rows = a.dim() >= 3 && b.dim() == 2 ? rows_view(a) : std::nullopt;
  if (rows) {
    const int64_t R = rows->shape()[0], N = out_shape.back();
    Tensor out_rows = view_of(out, Shape{R, N}, Shape{N, 1});
    batched_gemm(*rows, false, b, false, out_rows, Shape{}, false);
  } else {
    batched_gemm(a, false, b, false, out, batch, false);
  }
  if (auto* node = record<MatmulNode>(out, a_in, b_in)) {
    node->a = rows ? *rows : a;
    node->b = b;
    node->batch = rows ? Shape{} : batch;
    node->folded = rows.has_value();
  }
  return out;
}

// linear (matmul_bias).   x: (..., K), weight W: (N, K), bias b: (N) -> y: (..., N);  X = x as its (R, K)
// rows (R = numel(x) / K), dY = dy as (R, N):
// forward : y = X Wᵀ + b           one gemm over all R rows that starts from b in every row (beta = 1),
//                                  so the output is written once and BLAS does not zero it first
// backward: dX = dY W,  dW = dYᵀ X (summed over the rows by the product),  db = sum_rows dY
//           A row of dY that is all zero adds nothing to dW and makes its row of dX zero, so when many
//           are (a classifier's padded positions: the pooling skips them and later layers hide them as
//           keys), the products run over the other rows only. Exact: dW's sum keeps its terms, regrouped.
// saves   : X as BLAS reads it, W
namespace {

/// linear's forward: the output, and X and W as BLAS read them (what the backward needs).
struct LinearForward {
  Tensor out, x_rows, weight;
};

/// ShapeError or DTypeError naming `op` unless x (..., K), weight (N, K) and bias (N, or undefined) fit.
void check_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const char* op) {
  if (x.dim() == 0 || weight.dim() != 2 || x.shape().back() != weight.shape()[1])
    throw ShapeError(cat(op, ": x ", x.shape(), " @ weight ", weight.shape(),
                         "ᵀ: weight must be (N, K) with K the last dim of x"));
  check_same_float(x, weight, op);
  if (!bias.defined()) return;
  if (bias.dim() != 1 || bias.shape()[0] != weight.shape()[0])
    throw ShapeError(cat(op, ": bias ", bias.shape(), " does not match weight ", weight.shape(), " (expected [",
                         weight.shape()[0], "])"));
  check_same_float(x, bias, op);
}

/// The product of checked operands (check_linear) with a bias.
LinearForward linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const char* op) {
  const int64_t N = weight.shape()[0];
  std::optional<Tensor> rows = rows_view(x);
  if (!rows) {  // rows not evenly spaced (a transposed view): a contiguous copy, not recorded
    NoGradGuard no_grad;
    rows = rows_view(x.clone());
  }
  const Tensor w = blas_readable(weight);
  const Tensor b = bias.detach().contiguous();
  Shape out_shape = x.shape();
  out_shape[out_shape.rank() - 1] = N;
  Tensor out = empty(out_shape, x.dtype());
  const int64_t R = rows->shape()[0];
  Tensor out_rows = view_of(out, Shape{R, N}, Shape{N, 1});
  dispatch_float(x.dtype(), op, [&](auto tag) {  // every row starts as b
    using T = decltype(tag);
    repeat_row(b.data<T>(), out.data<T>(), R, N);
  });
  batched_gemm(*rows, false, w, true, out_rows, Shape{}, /*accumulate=*/true);  // onto b (b itself when K = 0)
  return {out, *rows, w};
}

// The zero rows of dY are skipped when they are at least 1/kSkipZeroRowsFrom of them, in at most
// kMaxRowRuns runs of the others (each run is its own product: fewer, longer products run faster), and
// gaps under kMinZeroGap rows (a multiple of BLAS's row tiles) stay inside a run.
constexpr int64_t kSkipZeroRowsFrom = 8, kMaxRowRuns = 4, kMinZeroGap = 32;

/// The runs of rows of dY (R, N) that linear's backward products cover: every row, or the runs that hold
/// a non-zero when skipping the others pays (see above).
const std::vector<RowRun>& rows_with_gradient(const Tensor& dy) {
  thread_local std::vector<RowRun> this_threads_runs;
  std::vector<RowRun>& runs = this_threads_runs;
  const int64_t R = dy.shape()[0], N = dy.shape()[1];
  dispatch_float(dy.dtype(), "linear", [&](auto tag) {
    using T = decltype(tag);
    nonzero_row_runs(dy.data<T>(), R, N, dy.strides()[0], kMinZeroGap, runs);
  });
  int64_t covered = 0;
  for (const RowRun& run : runs) covered += run.second - run.first;
  if (static_cast<int64_t>(runs.size()) > kMaxRowRuns || (R - covered) * kSkipZeroRowsFrom < R)
    runs.assign(1, RowRun{0, R});
  return runs;
}

/// linear's backward from dY (R, N): dX = dY W, dW = dYᵀ X, db = sum_rows dY; the products run over the
/// rows of dY that rows_with_gradient gives, and the other rows of dX are zero.
void linear_backward(const Tensor& dy, const Tensor& xv, const Tensor& wv, BackwardContext& ctx) {
  const std::vector<RowRun>& runs = rows_with_gradient(dy);
  const int64_t N = dy.shape()[1], K = xv.shape()[1];
  auto rows_of = [&](const Tensor& t, int64_t cols, int64_t ld, const RowRun& run) {
    return view_of(t, Shape{run.second - run.first, cols}, Shape{ld, 1}, run.first * ld);
  };
  ctx.add_into(0, [&](auto dx) {  // dX = dY W
    using T = typename decltype(dx)::value_type;
    int64_t done = 0;  // rows of dX written so far
    auto zero_rows_to = [&](int64_t row) {  // rows [done, row) of dY are zero, and so are dX's
      if (dx.mode == GradMode::assign) std::fill(dx.data() + done * K, dx.data() + row * K, T(0));
      done = row;
    };
    for (const RowRun& run : runs) {
      zero_rows_to(run.first);
      Tensor dx_rows = rows_of(dx.tensor, K, K, run);
      batched_gemm(rows_of(dy, N, dy.strides()[0], run), false, wv, false, dx_rows, Shape{}, dx.beta);
      done = run.second;
    }
    zero_rows_to(xv.shape()[0]);
  });
  ctx.add_into(1, [&](auto dw) {  // dW = dYᵀ X, summed run by run
    using T = typename decltype(dw)::value_type;
    if (runs.empty() && dw.mode == GradMode::assign) std::fill(dw.data(), dw.data() + dw.tensor.numel(), T(0));
    for (size_t i = 0; i < runs.size(); ++i)
      batched_gemm(rows_of(dy, N, dy.strides()[0], runs[i]), true, rows_of(xv, K, xv.strides()[0], runs[i]), false,
                   dw.tensor, Shape{}, i == 0 ? dw.beta : T(1));
  });
  ctx.accumulate(2, dy);  // db: dy's rows summed into (N)
}

}  // namespace

struct MatmulBiasNode : NodeOf<MatmulBiasNode> {
  static constexpr const char* kName = "matmul_bias";
  Saved x_rows, weight;  // (R, K), (N, K)
  double flops() const override { return product_flops(*this); }
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    const Tensor &xv = x_rows.get(kName), &wv = weight.get(kName);
    const int64_t R = xv.shape()[0], N = wv.shape()[0];
    linear_backward(view_of(dout, Shape{R, N}, Shape{N, 1}), xv, wv, ctx);  // dout is contiguous
  }
};

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_linear(x, weight, bias, "linear");
  if (!bias.defined()) return matmul(x, transpose(weight, 0, 1));
  LinearForward f = linear_forward(x, weight, bias, "linear");
  if (auto* node = record<MatmulBiasNode>(f.out, x, weight, bias)) {
    node->x_rows = f.x_rows;
    node->weight = f.weight;
  }
  return f.out;
}

// linear_relu.   y = max(z, 0),  z = X Wᵀ + b   (linear above, then relu on its output in place)
// backward: dZ = dY ⊙ [y > 0]   ([z > 0] = [y > 0]: relu keeps exactly the positive z), then linear's rule:
//           dX = dZ W,  dW = dZᵀ X,  db = sum_rows dZ
// saves   : X, W and y (which the next product saves too). z never gets a buffer of its own: one pass over
//           the output fewer than relu(linear(x)) in the forward, and one in the backward
struct LinearReluNode : NodeOf<LinearReluNode> {
  static constexpr const char* kName = "linear_relu";
  Saved x_rows, weight, out;  // (R, K), (N, K), (..., N)
  double flops() const override { return product_flops(*this); }
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    const Tensor &xv = x_rows.get(kName), &wv = weight.get(kName), &y = out.get(kName);
    const int64_t R = xv.shape()[0], N = wv.shape()[0];
    // dz over dout where the tape allows: one (R, N) buffer less at the peak of a layer's backward.
    const Tensor dz = reshape(ctx.overwritable_dout(), Shape{R, N});
    dispatch_float(dout.dtype(), kName, [&](auto tag) {
      using T = decltype(tag);
      const T *g = dout.data<T>(), *yv = y.data<T>();
      T* d = dz.data<T>();
      parallel_for(R * N, grain_for_elements(1), [&](int64_t begin, int64_t end) {
        // Local restrict pointers and an unconditional load of g: a loop the compiler turns into vector
        // compares and blends (with a conditional load it stays a branch per element)
        const T *__restrict gi = g, *__restrict yi = yv;
        T* __restrict di = d;
        for (int64_t i = begin; i < end; ++i) {
          const T gv = gi[i];
          di[i] = yi[i] > 0 ? gv : T(0);
        }
      });
    });
    linear_backward(dz, xv, wv, ctx);
  }
};

Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!bias.defined()) return relu(linear(x, weight, bias));
  check_linear(x, weight, bias, "linear_relu");
  LinearForward f = linear_forward(x, weight, bias, "linear_relu");
  dispatch_float(f.out.dtype(), "linear_relu", [&](auto tag) {
    using T = decltype(tag);
    T* y = f.out.data<T>();
    parallel_for(f.out.numel(), grain_for_elements(1), [&](int64_t begin, int64_t end) {
      T* __restrict yi = y;
      for (int64_t i = begin; i < end; ++i) yi[i] = yi[i] > 0 ? yi[i] : T(0);  // relu's convention
    });
  });
  if (auto* node = record<LinearReluNode>(f.out, x, weight, bias)) {
    node->x_rows = f.x_rows;
    node->weight = f.weight;
    node->out = f.out;
  }
  return f.out;
}

namespace {
const bool registered = register_gradchecks({
    op_case("matmul/linear", {{{2, 3, 4}}, {{5, 4}}, {{5}}}, [](auto& in) { return linear(in[0], in[1], in[2]); }),
    op_case("matmul/linear/vector-input", {{{4}}, {{3, 4}}, {{3}}}, [](auto& in) { return linear(in[0], in[1], in[2]); }),
    // x a transposed view (copied to rows first), weight a block of rows of a larger matrix (read in place)
    op_case("matmul/linear/transposed-x-weight-rows", {{{4, 2, 3}}, {{6, 4}}, {{2}}},
            [](auto& in) { return linear(transpose(in[0], 0, 2), slice(in[1], 0, 1, 3), in[2]); }),
    op_case("matmul/linear/no-bias", {{{2, 3, 4}}, {{5, 4}}}, [](auto& in) { return linear(in[0], in[1], Tensor()); }),
    op_case("matmul/linear_relu", {{{2, 3, 4}}, {{5, 4}}, {{5}}}, [](auto& in) { return linear_relu(in[0], in[1], in[2]); }),
    op_case("matmul/linear_relu/transposed-x", {{{4, 2, 3}}, {{6, 4}}, {{6}}},
            [](auto& in) { return linear_relu(transpose(in[0], 0, 2), in[1], in[2]); }),
    op_case("matmul/2d", {{{3, 4}}, {{4, 5}}}, [](auto& in) { return matmul(in[0], in[1]); }),
    op_case("matmul/batched-broadcast", {{{2, 1, 3, 4}}, {{3, 4, 2}}}, [](auto& in) { return matmul(in[0], in[1]); }),
    op_case("matmul/transposed-operands", {{{4, 3}}, {{2, 5, 4}}},
            [](auto& in) { return matmul(transpose(in[0], 0, 1), transpose(in[1], 1, 2)); }),
    op_case("matmul/vector-matrix", {{{4}}, {{4, 3}}}, [](auto& in) { return matmul(in[0], in[1]); }),
    op_case("matmul/matrix-vector", {{{2, 3, 4}}, {{4}}}, [](auto& in) { return matmul(in[0], in[1]); }),
});
}  // namespace

}  // namespace tapegrad
