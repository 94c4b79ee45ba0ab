// Multi-head self-attention as one op on the packed projection.
//
// Heads are strided matrices inside qkv: head h of q is the (T, D) block at column h·D of each batch's
// (T, 3C) rows, leading dimension 3C; k and v are the blocks C and 2C further on. The products
// (gemm_on_this_thread: the register tiles for a small float32 head, else BLAS) read them in place, and
// each head's output is written in place at column h·D of the (T, C) output (leading dim C), which is the
// merged layout out_proj reads. No per-head copy or reshape exists, but for the tiles' transposed copy of K
// or V, one (D, T) block, in Q Kᵀ and dO Vᵀ.
//
// Large models keep no (T, T) matrix past its head's turn: the scores and weights live in per-thread
// scratch blocks, and backward recomputes them from the saved qkv with the same products and the same
// softmax code, so they are bit for bit the forward's (as FlashAttention does; here per head, not per
// tile). That costs one (T, T, D) product and a softmax per head in backward and saves B·H·T² numbers per
// layer: 17 MB of the 67 MB a layer of the `medium` benchmark model keeps for its backward. When the
// weights are small (under kKeptAttentionWeightsBytes: 1 MiB a layer for the `small` model) they are kept
// instead, which saves the recomputation (about 7% of that model's step). The B·H heads are
// independent and run in parallel.
#include "autograd/ops/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/kernels/gemm.h"
#include "autograd/kernels/scratch.h"
#include "autograd/kernels/softmax.h"
#include "autograd/ops/indexing.h"
#include "autograd/parallel.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

namespace {

constexpr const char* kOp = "fused_self_attention";

/// A mask as the numbers added to the scores, in the scores' dtype: -inf where a bool mask hides a key,
/// a float mask's own values. Undefined stays undefined. Made once per call, so that the per-head loops
/// add plain rows.
Tensor additive(const Tensor& mask, DType dtype) {
  if (!mask.defined() || mask.dtype() != DType::boolean) return mask;
  NoGradGuard no_grad;
  return where(mask, full(mask.shape(), -std::numeric_limits<double>::infinity(), dtype), zeros(mask.shape(), dtype));
}

/// The additive masks of one call: attn (T, T) and padding (B, T), either possibly absent.
template <class F>
struct AddedMasks {
  const F* attn = nullptr;
  const F* padding = nullptr;
  AddedMasks(const Tensor& attn_mask, const Tensor& key_padding_mask)
      : attn(attn_mask.defined() ? attn_mask.data<F>() : nullptr),
        padding(key_padding_mask.defined() ? key_padding_mask.data<F>() : nullptr) {}
};

void check_mask(const Tensor& mask, const Tensor& qkv, bool per_batch, const char* what) {
  if (!mask.defined()) return;
  const int64_t B = qkv.size(0), T = qkv.size(1);
  const Shape expected = per_batch ? Shape{B, T} : Shape{T, T};
  if (!(mask.shape() == expected))
    throw ShapeError(cat(kOp, ": ", what, " ", mask.shape(), " must be ", expected, " for qkv ", qkv.shape()));
  if (mask.dtype() != DType::boolean && mask.dtype() != qkv.dtype())
    throw DTypeError(cat(kOp, ": ", what, " ", mask.shape(), " is ", dtype_name(mask.dtype()),
                         "; expected bool (true = hidden) or ", dtype_name(qkv.dtype()), " (added to the scores)"));
  if (mask.requires_grad())
    throw AutogradError(cat(kOp, ": ", what, " ", mask.shape(),
                            " requires grad, which the fused op does not give; use scaled_dot_product_attention"));
  if (!mask.is_contiguous())
    throw ShapeError(cat(kOp, ": ", what, " ", mask.shape(), " must be contiguous"));
}

struct HeadScratch;  // the per-thread (T, T) scores and weights of one head (kernels/scratch.h)

/// P = softmax(s · Q Kᵀ + masks) for head (b, h), into P (T, T); S is (T, T) scratch.
template <class F>
void head_weights(const F* q, const F* k, int64_t ld, int64_t T, int64_t D, F scale, const AddedMasks<F>& masks,
                  int64_t b, F* S, F* P) {
  gemm_on_this_thread(false, true, T, T, D, scale, q, ld, k, ld, F(0), S, T);  // S = s Q Kᵀ
  for (int64_t i = 0; i < T; ++i) {
    F* row = S + i * T;
    if (masks.attn)
      for (int64_t j = 0; j < T; ++j) row[j] += masks.attn[i * T + j];
    if (masks.padding)
      for (int64_t j = 0; j < T; ++j) row[j] += masks.padding[b * T + j];
    softmax_row(row, P + i * T, T, kContiguous);
  }
}

}  // namespace

// Per batch b and head h, with Q, K, V the (T, D) blocks of qkv and s = 1/√D:
// forward : S = s · Q Kᵀ + M            (M: the masks, -inf where hidden)
//           P = softmax(S) per row       (an all-hidden row gives zeros)
//           O = P V                      written at columns h·D of the output
// backward: dV = Pᵀ dO
//           dP = dO Vᵀ
//           dS = P ⊙ (dP - rowsum(dP ⊙ P))    the softmax rule J = diag(p) - p pᵀ applied per row; a
//                                            hidden score has P = 0, so it gets no gradient
//           dQ = s · dS K,   dK = s · dSᵀ Q
//           written (or added) into the matching blocks of dqkv
// saves   : qkv (its blocks are Q, K, V) and the masks as added numbers; P when small, else it is
//           recomputed (file comment)
struct FusedAttentionNode : NodeOf<FusedAttentionNode> {
  static constexpr const char* kName = "fused_self_attention";
  Saved qkv, attn_mask, key_padding_mask;  // masks are data: no gradient reaches them
  Saved weights;                           // (B, H, T, T) P, or undefined: recompute it
  int64_t heads = 1;
  // q kᵀ and P v over every head: 2 · 2·B·T·T·C, out being (B, T, C)
  double flops() const override { return 4.0 * static_cast<double>(out_shape.numel()) * static_cast<double>(out_shape[1]); }
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    if (!ctx.needs_grad(0)) return;
    const Tensor& x = qkv.get(kName);
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2) / 3, H = heads, D = C / H;
    if (!(dout.shape() == Shape{B, T, C}))
      throw AutogradError(cat(kName, " backward: dout ", dout.shape(), " vs output [", B, ",", T, ",", C, "]"));
    // Every element of dqkv gets exactly one head's product: added (or assigned) with the buffer's beta.
    ctx.add_into(0, [&](auto dqkv) {
      using F = typename decltype(dqkv)::value_type;
      const F scale = static_cast<F>(1.0 / std::sqrt(static_cast<double>(D)));
      const F beta = dqkv.beta;
      const AddedMasks<F> masks(attn_mask.get(kName), key_padding_mask.get(kName));
      const F *px = x.data<F>(), *pdo = dout.data<F>();
      const F* kept = weights.get(kName).defined() ? weights.get(kName).template data<F>() : nullptr;
      F* pdx = dqkv.data();
      parallel_for(B * H, grain_for_flops(10 * T * T * D), [&](int64_t first, int64_t last) {  // 5 products
        F *recomputed = scratch<F, HeadScratch>(2 * T * T), *dP = recomputed + T * T;
        for (int64_t bh = first; bh < last; ++bh) {
          const int64_t b = bh / H, h = bh % H;
          const F* q = px + b * T * 3 * C + h * D;
          const F *k = q + C, *v = q + 2 * C;
          if (!kept) head_weights(q, k, 3 * C, T, D, scale, masks, b, dP, recomputed);  // dP: the scores' scratch
          const F* P = kept ? kept + bh * T * T : recomputed;
          const F* dO = pdo + b * T * C + h * D;
          F* dq = pdx + b * T * 3 * C + h * D;
          F *dk = dq + C, *dv = dq + 2 * C;
          gemm_on_this_thread(true, false, T, D, T, F(1), P, T, dO, C, beta, dv, 3 * C);  // dV = Pᵀ dO
          gemm_on_this_thread(false, true, T, T, D, F(1), dO, C, v, 3 * C, F(0), dP, T);  // dP = dO Vᵀ
          for (int64_t i = 0; i < T; ++i)  // dS, over dP's memory
            softmax_row_backward(P + i * T, dP + i * T, assign_to(dP + i * T), T, kContiguous);
          gemm_on_this_thread(false, false, T, D, T, scale, dP, T, k, 3 * C, beta, dq, 3 * C);  // dQ = s dS K
          gemm_on_this_thread(true, false, T, D, T, scale, dP, T, q, 3 * C, beta, dk, 3 * C);   // dK = s dSᵀ Q
        }
      });
    });
  }
};

FusedAttention fused_self_attention(const Tensor& qkv, int64_t n_heads, const Tensor& attn_mask,
                                    const Tensor& key_padding_mask, bool return_weights) {
  if (!is_floating(qkv.dtype()))
    throw DTypeError(cat(kOp, ": qkv must be float32 or float64, got ", dtype_name(qkv.dtype()), " ", qkv.shape()));
  if (qkv.dim() != 3 || qkv.size(2) % 3 != 0 || n_heads <= 0 || (qkv.size(2) / 3) % n_heads != 0)
    throw ShapeError(cat(kOp, ": qkv ", qkv.shape(), " must be (B, T, 3C) with C divisible by n_heads = ", n_heads));
  check_mask(attn_mask, qkv, false, "attn_mask");
  check_mask(key_padding_mask, qkv, true, "key_padding_mask");
  const Tensor x = qkv.contiguous();
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2) / 3, H = n_heads, D = C / H;
  FusedAttention result{empty({B, T, C}, x.dtype()), return_weights ? empty({B, H, T, T}, x.dtype()) : Tensor{}};
  const bool keep = !return_weights && grad_enabled() && qkv.requires_grad() &&
                    B * H * T * T * static_cast<int64_t>(itemsize(x.dtype())) < kKeptAttentionWeightsBytes;
  const Tensor kept = keep ? empty({B, H, T, T}, x.dtype()) : Tensor{};
  const Tensor attn_added = additive(attn_mask, x.dtype()), padding_added = additive(key_padding_mask, x.dtype());
  dispatch_float(x.dtype(), kOp, [&](auto tag) {
    using F = decltype(tag);
    const F scale = static_cast<F>(1.0 / std::sqrt(static_cast<double>(D)));
    const AddedMasks<F> masks(attn_added, padding_added);
    const F* px = x.data<F>();
    F* po = result.output.data<F>();
    parallel_for(B * H, grain_for_flops(4 * T * T * D), [&](int64_t first, int64_t last) {  // 2 products
      F *S = scratch<F, HeadScratch>(2 * T * T), *P = S + T * T;
      for (int64_t bh = first; bh < last; ++bh) {
        const int64_t b = bh / H, h = bh % H;
        const F* q = px + b * T * 3 * C + h * D;
        const F *k = q + C, *v = q + 2 * C;
        F* weights = return_weights ? result.weights.data<F>() + bh * T * T : keep ? kept.data<F>() + bh * T * T : P;
        head_weights(q, k, 3 * C, T, D, scale, masks, b, S, weights);
        // O = P V
        gemm_on_this_thread(false, false, T, D, T, F(1), weights, T, v, 3 * C, F(0), po + b * T * C + h * D, C);
      }
    });
  });
  if (auto* node = record<FusedAttentionNode>(result.output, qkv)) {
    node->qkv = x;
    node->attn_mask = attn_added;
    node->key_padding_mask = padding_added;
    node->heads = H;
    node->weights = kept;
  }
  return result;
}

namespace {

// Masks as in nn/attention's cases: the key-padding mask hides key 3 of batch 0 and key 0 of batch 1,
// and with the causal mask query 0 of batch 1 sees no key at all (a zero row, whose gradient is zero).
Tensor causal_4() {
  std::vector<int> hidden(16);
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j) hidden[i * 4 + j] = 1;
  return mask(hidden, {4, 4});
}

const bool registered = register_gradchecks({
    op_case("attention/fused_self_attention/two-heads", {{{2, 4, 12}}},
            [](const std::vector<Tensor>& in) { return fused_self_attention(in[0], 2).output; }),
    op_case("attention/fused_self_attention/causal-key-padding", {{{2, 4, 18}}},
            [](const std::vector<Tensor>& in) {
              return fused_self_attention(in[0], 3, causal_4(), mask({0, 0, 0, 1, 1, 0, 0, 0}, {2, 4})).output;
            }),
});

}  // namespace

}  // namespace tapegrad
