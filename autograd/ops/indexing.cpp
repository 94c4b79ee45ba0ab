// Indexing: embedding lookup (rows by int64 id), masked_fill and where (selection by a bool mask).
// Ids and masks are never differentiated; they are read through their strides, like every other input.
#include "autograd/ops/indexing.h"

#include "autograd/elementwise_map.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

namespace {

/// The multi-index of row-major position `flat` in `shape`, printed like a shape: [1,2].
std::string position_of(int64_t flat, const Shape& shape) {
  Shape index = shape;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    index[i] = flat % shape[i];
    flat /= shape[i];
  }
  return index.str();
}

/// Calls body(id, row) for every id in row-major order, row being its row-major position in ids.
template <class Body>
void for_each_id(const Tensor& ids, Body&& body) {
  const int64_t* pi = ids.data<int64_t>();
  for_each_row<2>(ids.shape(), {ids.strides(), contiguous_strides(ids.shape())}, [&](auto off, int64_t n, auto step) {
    for (int64_t k = 0; k < n; ++k) body(pi[off[0] + k * step[0]], off[1] + k * step[1]);
  });
}

/// dx_k += dout where mask == keep (0 elsewhere), over dout's shape; the mask broadcasts to it, and input
/// k sums over the dims where it was broadcast. Nothing when input k needs no gradient.
void add_selected(BackwardContext& ctx, size_t k, const Tensor& dout, const Tensor& mask, bool keep) {
  if (!ctx.needs_grad(k)) return;
  const Shape& shape = dout.shape();
  const bool each_once = ctx.input_shape(k) == shape;
  ctx.add_into(k, [&](auto dx) {
    using T = typename decltype(dx)::value_type;
    const T* pg = dout.data<T>();
    const bool* pm = mask.data<bool>();
    const auto rows = [&](auto off, int64_t n, auto step) {
      const auto d = dx + off[0];
      const T* g = pg + off[1];
      const bool* m = pm + off[2];
      if (step[0] == 1 && step[1] == 1 && step[2] == 1) {  // contiguous rows
        // a select with g read unconditionally and the mask read as bytes: vectorises
        const auto* mb = reinterpret_cast<const unsigned char*>(m);
        const unsigned char want = keep ? 1 : 0;
        for (int64_t i = 0; i < n; ++i) {
          const T v = g[i];
          d[i] += (mb[i] != 0) == want ? v : T(0);
        }
      } else {
        for (int64_t i = 0; i < n; ++i) d[i * step[0]] += m[i * step[2]] == keep ? g[i * step[1]] : T(0);
      }
    };
    const std::array<Shape, 3> strides{broadcast_strides(dx.tensor, shape), dout.strides(), broadcast_strides(mask, shape)};
    if (each_once) parallel_for_each_row<3>(shape, strides, rows);  // disjoint elements of dx
    else for_each_row<3>(shape, strides, rows);
  }, each_once ? Adds::each_once : Adds::scattered);
}

void require_bool(const Tensor& mask, const char* op, const char* what) {
  if (mask.dtype() != DType::boolean)
    throw DTypeError(cat(op, ": ", what, " ", mask.shape(), " must be bool, got ", dtype_name(mask.dtype())));
}

}  // namespace

// embedding.   weight: (V, C), ids: int64 (...) -> out: (..., C)
// forward : out[p, :] = weight[ids[p], :]           for every position p of ids
// backward: d out[p, c] / d weight[v, c'] = [ids[p] = v][c = c'], so
//           dweight[ids[p], :] += dout[p, :]        a scatter-add: a repeated id accumulates each use
//           skipped where ids[p] = padding_idx, whose row is treated as a constant (it still reads out)
// saves   : ids
struct EmbeddingNode : NodeOf<EmbeddingNode> {
  static constexpr const char* kName = "embedding";
  Saved ids;
  int64_t padding_idx = -1;
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    if (!ctx.needs_grad(0)) return;
    const Tensor& id_values = ids.get(kName);
    const int64_t channels = inputs[0].shape[1];
    ctx.add_into(0, [&](auto dweight) {  // contiguous (V, C)
      using T = typename decltype(dweight)::value_type;
      const T* pg = dout.data<T>();  // contiguous (..., C)
      for_each_id(id_values, [&](int64_t id, int64_t row) {
        if (id == padding_idx) return;
        const auto to = dweight + id * channels;
        const T* from = pg + row * channels;
        for (int64_t c = 0; c < channels; ++c) to[c] += from[c];
      });
    }, Adds::scattered);
  }
};

Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx) {
  if (weight.dim() != 2)
    throw ShapeError(cat("embedding: weight ", weight.shape(), " must be 2-D (V, C); ids ", ids.shape()));
  if (ids.dtype() != DType::int64)
    throw DTypeError(cat("embedding: ids ", ids.shape(), " must be int64, got ", dtype_name(ids.dtype()), "; weight ",
                         weight.shape()));
  if (!is_floating(weight.dtype()))
    throw DTypeError(
        cat("embedding: weight ", weight.shape(), " is ", dtype_name(weight.dtype()), "; expected float32 or float64"));
  const int64_t vocab = weight.shape()[0], channels = weight.shape()[1];
  if (padding_idx >= vocab)
    throw ValueError(cat("embedding: padding_idx ", padding_idx, " is out of range for weight ", weight.shape(),
                         " (V = ", vocab, "); pass -1 for none"));
  Shape shape = ids.shape();
  shape.push_back(channels);
  Tensor out = empty(shape, weight.dtype());
  dispatch_float(weight.dtype(), "embedding", [&](auto tag) {
    using T = decltype(tag);
    const T* pw = weight.data<T>();
    T* po = out.data<T>();
    const int64_t row_stride = weight.strides()[0], col_stride = weight.strides()[1];
    for_each_id(ids, [&](int64_t id, int64_t row) {
      if (id < 0 || id >= vocab)
        throw ValueError(cat("embedding: id ", id, " at position ", position_of(row, ids.shape()), " of ids ",
                             ids.shape(), " is out of range [0, ", vocab, ") for weight ", weight.shape(),
                             " (V = ", vocab, ")"));
      const T* from = pw + id * row_stride;
      T* to = po + row * channels;
      for (int64_t c = 0; c < channels; ++c) to[c] = from[c * col_stride];
    });
  });
  if (auto* node = record<EmbeddingNode>(out, weight)) {
    node->ids = ids;
    node->padding_idx = padding_idx;
  }
  return out;
}

// masked_fill.   x: any, mask: bool broadcastable to x -> out: x's shape
// forward : out_i = mask_i ? value : x_i
// backward: d out_i / d x_i = [not mask_i], so dx = dout ⊙ !mask   (value is a constant: no gradient)
// saves   : mask
struct MaskedFillNode : NodeOf<MaskedFillNode> {
  static constexpr const char* kName = "masked_fill";
  static constexpr bool kMakesInfinity = true;  // -inf hides attention scores: not an anomaly
  Saved mask;
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    add_selected(ctx, 0, dout, mask.get(kName), false);
  }
};

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  require_bool(mask, "masked_fill", "mask");
  if (!is_floating(x.dtype()))
    throw DTypeError(cat("masked_fill: x ", x.shape(), " is ", dtype_name(x.dtype()), "; expected float32 or float64"));
  // The mask may broadcast up to x's shape but must not enlarge it: out always has x's shape.
  bool fits = mask.dim() <= x.dim();
  for (int i = 1; fits && i <= mask.dim(); ++i) {
    const int64_t dm = mask.shape()[mask.dim() - i], dx = x.shape()[x.dim() - i];
    fits = dm == dx || dm == 1;
  }
  if (!fits) throw ShapeError(cat("masked_fill: mask ", mask.shape(), " does not broadcast to x ", x.shape()));
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), "masked_fill", [&](auto tag) {
    using T = decltype(tag);
    const T fill = static_cast<T>(value);  // -inf stays -inf: the usual attention mask
    const T* px = x.data<T>();
    const bool* pm = mask.data<bool>();
    T* po = out.data<T>();
    const Shape& shape = x.shape();
    parallel_for_each_row<3>(shape, {out.strides(), x.strides(), broadcast_strides(mask, shape)},
                             [&](auto off, int64_t n, auto step) {
                               T* o = po + off[0];
                               const T* in = px + off[1];
                               if (step[0] == 1 && step[1] == 1 && step[2] == 1) {  // contiguous rows
                                 // A select with both sides read, and the mask read as bytes (GCC vectorises
                                 // neither a conditional load nor a bool load).
                                 const auto* m = reinterpret_cast<const unsigned char*>(pm + off[2]);
                                 for (int64_t k = 0; k < n; ++k) {
                                   const T v = in[k];
                                   o[k] = m[k] ? fill : v;
                                 }
                               } else {
                                 const bool* m = pm + off[2];
                                 for (int64_t k = 0; k < n; ++k) o[k * step[0]] = m[k * step[2]] ? fill : in[k * step[1]];
                               }
                             });
  });
  if (auto* node = record<MaskedFillNode>(out, x)) node->mask = mask;
  return out;
}

// where.     condition: bool, a, b: broadcastable -> out: broadcast(condition, a, b)
// forward : out_i = condition_i ? a_i : b_i
// backward: d out_i / d a_i = [condition_i], d out_i / d b_i = [not condition_i], so
//           da = sum_broadcast(dout ⊙ condition),  db = sum_broadcast(dout ⊙ !condition)
// saves   : condition
struct WhereNode : NodeOf<WhereNode> {
  static constexpr const char* kName = "where";
  Saved condition;
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    const Tensor& cond = condition.get(kName);
    add_selected(ctx, 0, dout, cond, true);
    add_selected(ctx, 1, dout, cond, false);
  }
};

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  require_bool(condition, "where", "condition");
  check_same_float(a, b, "where");
  Shape shape;
  try {
    shape = broadcast_shapes(condition.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
  } catch (const ShapeError&) {
    throw ShapeError(cat("where: condition ", condition.shape(), ", a ", a.shape(), " and b ", b.shape(),
                         " do not broadcast to one shape"));
  }
  Tensor out = empty(shape, a.dtype());
  dispatch_float(a.dtype(), "where", [&](auto tag) {
    using T = decltype(tag);
    const T *pa = a.data<T>(), *pb = b.data<T>();
    const bool* pc = condition.data<bool>();
    T* po = out.data<T>();
    for_each_row<4>(
        shape,
        {out.strides(), broadcast_strides(condition, shape), broadcast_strides(a, shape), broadcast_strides(b, shape)},
        [&](auto off, int64_t n, auto step) {
          for (int64_t k = 0; k < n; ++k)
            po[off[0] + k * step[0]] = pc[off[1] + k * step[1]] ? pa[off[2] + k * step[2]] : pb[off[3] + k * step[3]];
        });
  });
  if (auto* node = record<WhereNode>(out, a, b)) node->condition = condition;
  return out;
}

namespace {
using K = InputSpec::Kind;
const bool registered = register_gradchecks({
    op_case("indexing/embedding", {{{7, 3}}, {{2, 5}, K::ids, 7}}, [](auto& in) { return embedding(in[0], in[1]); }),
    // 12 ids drawn from 5 values: rows repeat, so the scatter-add accumulates. padding_idx is the one row no
    // id uses: a used padding row reads out in the forward but gets no gradient, which central differences
    // would (rightly) call wrong; tests/autograd/test_indexing.cpp covers that skip.
    op_case("indexing/embedding/repeated-ids-padding", {{{6, 4}}, {{3, 4}, K::ids, 5}},
            [](auto& in) { return embedding(in[0], in[1], 5); }),
    op_case("indexing/masked_fill/same-shape", {{{3, 4}}, {{3, 4}, K::mask}},
            [](auto& in) { return masked_fill(in[0], in[1], 0.5); }),
    op_case("indexing/masked_fill/broadcast-mask", {{{2, 3, 4}}, {{3, 1}, K::mask}},
            [](auto& in) { return masked_fill(in[0], in[1], -2.0); }),
    op_case("indexing/where/broadcast-all", {{{2, 1, 4}, K::mask}, {{3, 1}}, {{1, 3, 4}}},
            [](auto& in) { return where(in[0], in[1], in[2]); }),
    op_case("indexing/where/same-shape", {{{3, 5}, K::mask}, {{3, 5}}, {{3, 5}}},
            [](auto& in) { return where(in[0], in[1], in[2]); }),
});
}  // namespace

}  // namespace tapegrad
