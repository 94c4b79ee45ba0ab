// Flash attention: scaled dot-product attention in blocks, memory linear in T (seed 003, §5).
//
// Materialised attention writes a (T_q, T_k) score matrix per head and reads it back three times; at
// T = 2048 that is 16 MiB a head, and backward keeps it. Here a block of queries meets a block of keys
// at a time; softmax's normaliser is built as the blocks go (the online softmax) and only each row's
// log-sum-exp is kept for backward, which recomputes each block's probabilities from it. The kernels
// are in kernels/flash_attention.{h,cpp}, beside a plain reference.
#include "autograd/ops/flash_attention.h"

#include <cmath>

#include "autograd/ops/views.h"
#include "autograd/parallel.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

namespace {

constexpr const char* kOp = "flash_attention";

/// Per batch and head, where the head's (T, D) matrix starts and its leading dim: the tensor's strides.
template <class T>
struct Heads {
  T* data;
  int64_t batch_stride, head_stride, ld, H;
  Heads(const Tensor& t, T* base)
      : data(base), batch_stride(t.strides()[0]), head_stride(t.strides()[1]), ld(t.strides()[2]), H(t.size(1)) {}
  HeadMatrix<T> at(int64_t bh) const { return {data + bh / H * batch_stride + bh % H * head_stride, ld}; }
};

/// The tensor itself when BLAS can read its heads in place (unit stride along D), else a contiguous copy.
Tensor readable(const Tensor& t) { return t.strides()[3] == 1 || t.size(3) == 1 ? t : t.contiguous(); }

/// The scoring of head bh (b = bh / H, h = bh % H) of a call.
struct CallScoring {
  double scale;
  bool causal;
  const bool* padding;  // (B, T_k) or null
  const std::vector<double>* slopes;
  double dropout_p;
  uint64_t seed;
  int64_t H, T_q, T_k;
  HeadScoring head(int64_t bh) const {
    HeadScoring s;
    s.scale = scale;
    s.causal = causal;
    s.hidden_keys = padding ? padding + bh / H * T_k : nullptr;
    s.alibi_slope = slopes->empty() ? 0 : (*slopes)[bh % H];
    s.dropout_p = dropout_p;
    // The head's mask stream: element (i, j) of head bh hashes the index bh·T_q·T_k + i·T_k + j.
    s.dropout_stream = seed + static_cast<uint64_t>(bh * T_q * T_k) * 0x9E3779B97F4A7C15ull;
    return s;
  }
};

}  // namespace

// Per batch b and head h, with Q (T_q, D), K (T_k, D), V (T_k, D_v) and s the scale:
// forward : S_ij = s q_i·k_j + bias_ij        (-inf where a mask hides key j from query i)
//           P = softmax(S) per row;  Z = P ⊙ M / (1-p)  (M the dropout mask)
//           O = Z V
//   in blocks: for each block of keys, row i keeps m_i = max so far and l_i = sum_j exp(S_ij - m_i);
//   a new block with max m' rescales l_i and O_i by exp(m_i - m') before adding its own terms, so at the
//   end O_i / l_i is the row's output and L_i = m_i + log l_i its log-sum-exp (saved).
// backward: P_ij = exp(S_ij - L_i), recomputed per block from the saved L
//           dV = Zᵀ dO
//           dZ = dO Vᵀ;  dP = dZ ⊙ M / (1-p)
//           dS = Jᵀ dP per row with softmax's J = diag(P) - P Pᵀ:  dS_i = P_i ⊙ (dP_i - <dP_i, P_i>)
//           where <dP_i, P_i> = sum_j dZ_ij Z_ij = <dO_i, sum_j Z_ij V_j> = <dO_i, O_i> =: D_i,
//           one dot of two rows of length D_v instead of a row of T_k (dropout included)
//           dQ = s dS K;  dK = s dSᵀ Q
//   FlashAttention-2's order: key blocks outside, query blocks inside, so dK and dV of a key block are
//   finished before the next, and dQ sums over key blocks in a (T_q, D) buffer.
// saves   : q, k, v, O, L (B, H, T_q); the padding mask; the dropout seed. No (T_q, T_k) matrix.
struct FlashAttentionNode : NodeOf<FlashAttentionNode> {
  static constexpr const char* kName = "flash_attention";
  Saved q, k, v, out, lse, key_padding_mask;
  CallScoring scoring{};
  std::vector<double> slopes;
  AttentionBlocks blocks;
  int64_t head_dim = 0;  // D
  // the forward's products q kᵀ and P v over every head, 2·B·H·T_q·T_k·(D + D_v), as the fused op counts
  // them (blocks the causal mask skips included)
  double flops() const override {
    const double pairs = static_cast<double>(out_shape[0] * out_shape[1] * out_shape[2] * scoring.T_k);
    return 2.0 * pairs * static_cast<double>(head_dim + out_shape[3]);
  }
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    const Tensor &tq = q.get(kName), &tk = k.get(kName), &tv = v.get(kName), &to = out.get(kName);
    if (!(dout.shape() == to.shape()))
      throw AutogradError(cat(kName, " backward: dout ", dout.shape(), " vs output ", to.shape()));
    const int64_t B = tq.size(0), H = tq.size(1), T_q = tq.size(2), D = tq.size(3), T_k = tk.size(2),
                  D_v = tv.size(3);
    Tensor dq = empty(tq.shape(), tq.dtype()), dk = empty(tk.shape(), tk.dtype()), dv = empty(tv.shape(), tv.dtype());
    CallScoring call = scoring;
    call.slopes = &slopes;
    const Tensor& padding = key_padding_mask.get(kName);
    call.padding = padding.defined() ? padding.data<bool>() : nullptr;
    dispatch_float(tq.dtype(), kName, [&](auto tag) {
      using F = decltype(tag);
      const Heads<const F> hq(tq, tq.data<F>()), hk(tk, tk.data<F>()), hv(tv, tv.data<F>()), ho(to, to.data<F>()),
          hdo(dout, dout.data<F>());
      const Heads<F> hdq(dq, dq.data<F>()), hdk(dk, dk.data<F>()), hdv(dv, dv.data<F>());
      const F* plse = lse.get(kName).data<F>();
      parallel_for(B * H, grain_for_flops(10 * T_q * T_k * D), [&](int64_t first, int64_t last) {
        for (int64_t bh = first; bh < last; ++bh)
          flash_attention_backward<F>(hq.at(bh), hk.at(bh), hv.at(bh), ho.at(bh), plse + bh * T_q, hdo.at(bh), T_q,
                                      T_k, D, D_v, call.head(bh), blocks, hdq.at(bh), hdk.at(bh), hdv.at(bh));
      });
    });
    ctx.accumulate(0, dq);
    ctx.accumulate(1, dk);
    ctx.accumulate(2, dv);
  }
};

Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const FlashAttentionOptions& options) {
  for (const Tensor* t : {&q, &k, &v})
    if (!is_floating(t->dtype()) || t->dtype() != q.dtype())
      throw DTypeError(cat(kOp, ": q, k, v must share one float dtype, got ", dtype_name(q.dtype()), ", ",
                           dtype_name(k.dtype()), ", ", dtype_name(v.dtype())));
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4)
    throw ShapeError(cat(kOp, ": q ", q.shape(), ", k ", k.shape(), ", v ", v.shape(), " must be (B, H, T, D)"));
  const int64_t B = q.size(0), H = q.size(1), T_q = q.size(2), D = q.size(3), T_k = k.size(2), D_v = v.size(3);
  if (k.size(0) != B || k.size(1) != H || k.size(3) != D || v.size(0) != B || v.size(1) != H || v.size(2) != T_k)
    throw ShapeError(cat(kOp, ": q ", q.shape(), ", k ", k.shape(), ", v ", v.shape(),
                         " must be (B, H, T_q, D), (B, H, T_k, D), (B, H, T_k, D_v)"));
  const Tensor& padding = options.key_padding_mask;
  if (padding.defined() && (padding.dtype() != DType::boolean || !(padding.shape() == Shape{B, T_k})))
    throw ShapeError(cat(kOp, ": key_padding_mask ", padding.shape(), " ", dtype_name(padding.dtype()),
                         " must be bool (B, T_k) = [", B, ",", T_k, "]"));
  if (!options.alibi_slopes.empty() && static_cast<int64_t>(options.alibi_slopes.size()) != H)
    throw ShapeError(cat(kOp, ": ", options.alibi_slopes.size(), " ALiBi slopes for ", H, " heads"));
  if (!(options.dropout_p >= 0 && options.dropout_p < 1))
    throw ValueError(cat(kOp, ": dropout_p must be in [0, 1), got ", options.dropout_p));
  if (options.dropout_p > 0 && options.dropout_rng == nullptr)
    throw ValueError(cat(kOp, ": dropout_p = ", options.dropout_p, " needs a generator"));
  if (options.blocks.queries < 1 || options.blocks.keys < 1)
    throw ValueError(cat(kOp, ": block sizes must be >= 1, got ", options.blocks.queries, " x ", options.blocks.keys));
  if (!(options.scale >= 0 && std::isfinite(options.scale)))
    throw ValueError(cat(kOp, ": scale must be finite and >= 0 (0: 1/sqrt(D)), got ", options.scale));

  const Tensor tq = readable(q), tk = readable(k), tv = readable(v);
  const Tensor mask = padding.defined() ? padding.contiguous() : Tensor{};
  CallScoring call{.scale = options.scale > 0 ? options.scale : 1.0 / std::sqrt(static_cast<double>(D)),
                   .causal = options.causal,
                   .padding = mask.defined() ? mask.data<bool>() : nullptr,
                   .slopes = &options.alibi_slopes,
                   .dropout_p = options.dropout_p,
                   .seed = options.dropout_p > 0 ? options.dropout_rng->next_u64() : 0,
                   .H = H,
                   .T_q = T_q,
                   .T_k = T_k};
  // The output's memory is (B, T_q, H, D_v), heads side by side as nn's merge of the heads reads them (a
  // view, no copy); the op returns it as (B, H, T_q, D_v).
  Tensor out, lse = empty({B, H, T_q}, q.dtype());
  {
    NoGradGuard no_grad;
    out = transpose(empty({B, T_q, H, D_v}, q.dtype()), 1, 2);
  }
  dispatch_float(q.dtype(), kOp, [&](auto tag) {
    using F = decltype(tag);
    const Heads<const F> hq(tq, tq.data<F>()), hk(tk, tk.data<F>()), hv(tv, tv.data<F>());
    const Heads<F> ho(out, out.data<F>());
    F* plse = lse.data<F>();
    // Work items are (head, block of queries): independent rows of the output.
    const int64_t query_blocks = (T_q + options.blocks.queries - 1) / options.blocks.queries;
    const int64_t block_flops = 4 * options.blocks.queries * T_k * D;
    parallel_for(B * H * query_blocks, grain_for_flops(block_flops), [&](int64_t first, int64_t last) {
      for (int64_t item = first; item < last; ++item) {
        const int64_t bh = item / query_blocks, i0 = item % query_blocks * options.blocks.queries;
        const int64_t rows = std::min(options.blocks.queries, T_q - i0);
        const HeadMatrix<const F> qb{hq.at(bh).row(i0), hq.ld};
        const HeadMatrix<F> ob{ho.at(bh).row(i0), ho.ld};
        HeadScoring s = call.head(bh);
        s.first_query = i0;
        flash_attention_forward<F>(qb, hk.at(bh), hv.at(bh), rows, T_k, D, D_v, s, options.blocks, ob,
                                   plse + bh * T_q + i0);
      }
    });
  });
  if (auto* node = record<FlashAttentionNode>(out, q, k, v)) {
    node->q = tq;
    node->k = tk;
    node->v = tv;
    node->out = out;
    node->lse = lse;
    node->key_padding_mask = mask;
    node->scoring = call;
    node->slopes = options.alibi_slopes;
    node->blocks = options.blocks;
    node->head_dim = D;
  }
  return out;
}

}  // namespace tapegrad

namespace tapegrad {

namespace {

// Small blocks that do not divide T, so that every case crosses block edges (rows and keys), and masks
// as in fused_self_attention's cases: with the causal mask, query 0 of batch 1 sees no key at all (its
// key 0 is padded): a zero row whose gradient must be zero too.
Tensor padding_2x5() { return mask({0, 0, 0, 0, 1, 1, 0, 0, 0, 0}, {2, 5}); }

/// A case over q (2, 2, T_q, 3), k (2, 2, T_k, 3), v (2, 2, T_k, D_v), with the options `set` chooses.
template <class Set>
GradcheckCase flash_case(std::string variant, int64_t T_q, int64_t T_k, int64_t D_v, Set set) {
  FlashAttentionOptions options;
  set(options);
  const Shape q{2, 2, T_q, 3}, k{2, 2, T_k, 3}, v{2, 2, T_k, D_v};
  return op_case("attention/flash_attention/" + std::move(variant), {{q}, {k}, {v}},
                 [options](const std::vector<Tensor>& in) {
                   FlashAttentionOptions call = options;
                   Generator rng(11);  // the same dropout mask at every evaluation of the check
                   call.dropout_rng = &rng;
                   return flash_attention(in[0], in[1], in[2], call);
                 });
}

const bool registered = register_gradchecks({
    flash_case("blocks-2x3", 5, 5, 3, [](auto& o) { o.blocks = {2, 3}; }),
    flash_case("causal-key-padding", 5, 5, 3,
               [](auto& o) {
                 o.causal = true;
                 o.key_padding_mask = padding_2x5();
                 o.blocks = {2, 2};
               }),
    flash_case("cross-alibi-scale", 3, 5, 4,
               [](auto& o) {
                 o.scale = 0.7;
                 o.alibi_slopes = {0.5, 0.25};
                 o.blocks = {2, 3};
               }),
    flash_case("dropout", 5, 5, 3,
               [](auto& o) {
                 o.dropout_p = 0.3;
                 o.blocks = {2, 3};
               }),
    flash_case("causal-alibi-dropout-cross", 4, 6, 2,
               [](auto& o) {
                 o.causal = true;
                 o.alibi_slopes = {0.5, 0.25};
                 o.dropout_p = 0.25;
                 o.blocks = {3, 4};
               }),
    flash_case("T1-padded", 1, 1, 3, [](auto& o) { o.key_padding_mask = mask({0, 1}, {2, 1}); }),
    flash_case("one-block-causal", 5, 5, 3, [](auto& o) { o.causal = true; }),
});

}  // namespace

}  // namespace tapegrad
