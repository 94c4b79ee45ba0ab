// Flash attention: scaled dot-product attention in blocks, memory linear in T (seed 003, §5).
//
// Materialised attention writes a (T_q, T_k) score matrix per head and reads it back three times; at
// T = 2048 that is 16 MiB a head, and backward keeps it. Here a block of queries meets a block of keys
// at a time; softmax's normaliser is built as the blocks go (the online softmax) and only each row's
// log-sum-exp is kept for backward, which recomputes each block's probabilities from it. The kernels
// are in kernels/flash_attention.{h,cpp}, beside a plain reference.
#include "autograd/ops/flash_attention.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "autograd/ops/checkpoint.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/flash_attention_heads.h"
#include "autograd/ops/views.h"
#include "autograd/parallel.h"
#include "autograd/registry.h"
#include "autograd/tape.h"

namespace tapegrad {

using namespace flash_heads;

namespace {

constexpr const char* kOp = "flash_attention";

/// The tensor itself when BLAS can read its heads in place (unit stride along D), else a contiguous copy.
Tensor readable(const Tensor& t) { return t.strides()[3] == 1 || t.size(3) == 1 ? t : t.contiguous(); }

/// The options checked against the call's shapes, with a ShapeError or ValueError naming what is wrong.
void check_options(const FlashAttentionOptions& options, const Dims& d) {
  const Tensor& padding = options.key_padding_mask;
  if (padding.defined() && (padding.dtype() != DType::boolean || !(padding.shape() == Shape{d.B, d.T_k})))
    throw ShapeError(cat(kOp, ": key_padding_mask ", padding.shape(), " ", dtype_name(padding.dtype()),
                         " must be bool (B, T_k) = [", d.B, ",", d.T_k, "]"));
  if (!options.alibi_slopes.empty() && static_cast<int64_t>(options.alibi_slopes.size()) != d.H)
    throw ShapeError(cat(kOp, ": ", options.alibi_slopes.size(), " ALiBi slopes for ", d.H, " heads"));
  if (!(options.dropout_p >= 0 && options.dropout_p < 1))
    throw ValueError(cat(kOp, ": dropout_p must be in [0, 1), got ", options.dropout_p));
  if (options.dropout_p > 0 && options.dropout_rng == nullptr)
    throw ValueError(cat(kOp, ": dropout_p = ", options.dropout_p, " needs a generator"));
  if (options.blocks.queries < 0 || options.blocks.keys < 0)
    throw ValueError(cat(kOp, ": block sizes must be >= 0 (0: the kernel's own), got ", options.blocks.queries, " x ",
                         options.blocks.keys));
  if (!(options.scale >= 0 && std::isfinite(options.scale)))
    throw ValueError(cat(kOp, ": scale must be finite and >= 0 (0: 1/sqrt(D)), got ", options.scale));
}

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
// saves   : q, k, v (or the packed qkv), O, L (B, H, T_q); the padding mask; the dropout seed. No (T_q, T_k)
//           matrix.
struct FlashAttentionNode : NodeOf<FlashAttentionNode> {
  static constexpr const char* kName = "flash_attention";
  Saved q, k, v, out, lse, key_padding_mask;  // packed: q holds the packed (B, T, 3C) projection, k and v none
  bool packed = false;
  Dims dims{};
  CallScoring scoring;
  std::vector<double> slopes;
  AttentionBlocks blocks;
  // the forward's products q kᵀ and P v over every head, 2·B·H·T_q·T_k·(D + D_v), as the fused op counts
  // them (blocks the causal mask skips included)
  double flops() const override {
    return 2.0 * static_cast<double>(dims.B * dims.H * dims.T_q * dims.T_k) * static_cast<double>(dims.D + dims.D_v);
  }
  void backward(const Tensor& dout, BackwardContext& ctx) override {
    const Tensor& to = out.get(kName);
    if (!(dout.shape() == to.shape()))
      throw AutogradError(cat(kName, " backward: dout ", dout.shape(), " vs output ", to.shape()));
    CallScoring call = scoring;
    call.slopes = &slopes;
    const Tensor& padding = key_padding_mask.get(kName);
    call.padding = padding.defined() ? padding.data<bool>() : nullptr;
    if (packed) {  // straight into the packed gradient: each of its elements gets one head's contribution
      const Tensor& x = q.get(kName);
      ctx.add_into(0, [&](auto dqkv) {
        using F = typename decltype(dqkv)::value_type;
        backward_heads<F>(packed_heads<const F>(x.shape(), x.data<F>(), dims.H), heads_of<const F>(to, to.data<F>()),
                          lse.get(kName).data<F>(), heads_of<const F>(dout, dout.data<F>()), dims, call, blocks,
                          packed_heads<F>(x.shape(), dqkv.data(), dims.H), decltype(dqkv)::mode == GradMode::add);
      });
      return;
    }
    const Tensor &tq = q.get(kName), &tk = k.get(kName), &tv = v.get(kName);
    Tensor dq = empty(tq.shape(), tq.dtype()), dk = empty(tk.shape(), tk.dtype()), dv = empty(tv.shape(), tv.dtype());
    dispatch_float(tq.dtype(), kName, [&](auto tag) {
      using F = decltype(tag);
      backward_heads<F>({heads_of<const F>(tq, tq.data<F>()), heads_of<const F>(tk, tk.data<F>()),
                         heads_of<const F>(tv, tv.data<F>())},
                        heads_of<const F>(to, to.data<F>()), lse.get(kName).data<F>(),
                        heads_of<const F>(dout, dout.data<F>()), dims, call, blocks,
                        {heads_of<F>(dq, dq.data<F>()), heads_of<F>(dk, dk.data<F>()), heads_of<F>(dv, dv.data<F>())},
                        false);
    });
    ctx.accumulate(0, dq);
    ctx.accumulate(1, dk);
    ctx.accumulate(2, dv);
  }
};

namespace {

/// The forward of both entry points, given how to find the heads of q, k and v (`heads(tag)`), and the node
/// recorded by `record_node(out)` (which may return null), filled in here.
template <class HeadsOf, class Record>
Tensor run_flash(DType dtype, const Dims& d, const FlashAttentionOptions& options, HeadsOf heads, Record record_node) {
  check_options(options, d);
  const Tensor mask = options.key_padding_mask.defined() ? options.key_padding_mask.contiguous() : Tensor{};
  CallScoring call;
  call.scale = options.scale > 0 ? options.scale : 1.0 / std::sqrt(static_cast<double>(d.D));
  call.causal = options.causal;
  call.padding = mask.defined() ? mask.data<bool>() : nullptr;
  call.slopes = &options.alibi_slopes;
  call.dropout_p = options.dropout_p;
  call.seed = options.dropout_p > 0 ? options.dropout_rng->next_u64() : 0;
  call.H = d.H;
  call.T_q = d.T_q;
  call.T_k = d.T_k;
  AttentionBlocks blocks;
  dispatch_float(dtype, kOp, [&](auto tag) { blocks = kernel_blocks<decltype(tag)>(options.blocks, d.D, d.D_v); });
  // The output's memory is (B, T_q, H, D_v), heads side by side as nn's merge of the heads reads them (a
  // view, no copy); the op returns it as (B, H, T_q, D_v). Inside an activation checkpoint's recomputation
  // they are what the checkpoint's forward kept (checkpoint.h, KeptResults): O(T·D) numbers a head in place
  // of O(T²·D) work.
  Tensor out, lse;
  KeptResults* replaying = KeptResults::replaying();
  if (const Tensor* kept = replaying ? replaying->take(2) : nullptr) {
    if (!(kept[0].shape() == Shape{d.B, d.H, d.T_q, d.D_v}) || kept[0].dtype() != dtype)
      throw AutogradError(cat(kOp, ": the checkpoint's recomputation asks for ", Shape{d.B, d.H, d.T_q, d.D_v},
                              " where its forward gave ", kept[0].shape(), ": the function is not the same twice"));
    out = kept[0].detach();
    lse = kept[1];
  } else {
    lse = empty({d.B, d.H, d.T_q}, dtype);
    {
      NoGradGuard no_grad;
      out = transpose(empty({d.B, d.T_q, d.H, d.D_v}, dtype), 1, 2);
    }
    dispatch_float(dtype, kOp, [&](auto tag) {
      using F = decltype(tag);
      forward_heads<F>(heads(tag), heads_of<F>(out, out.data<F>()), lse.data<F>(), d, call, blocks);
    });
    if (KeptResults* keeping = KeptResults::keeping()) keeping->keep({out, lse});
  }
  if (FlashAttentionNode* node = record_node(out)) {
    node->out = out;
    node->lse = lse;
    node->key_padding_mask = mask;
    node->dims = d;
    node->scoring = call;
    node->slopes = options.alibi_slopes;
    node->blocks = blocks;
  }
  return out;
}

}  // namespace

Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const FlashAttentionOptions& options) {
  for (const Tensor* t : {&q, &k, &v})
    if (!is_floating(t->dtype()) || t->dtype() != q.dtype())
      throw DTypeError(cat(kOp, ": q, k, v must share one float dtype, got ", dtype_name(q.dtype()), ", ",
                           dtype_name(k.dtype()), ", ", dtype_name(v.dtype())));
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4)
    throw ShapeError(cat(kOp, ": q ", q.shape(), ", k ", k.shape(), ", v ", v.shape(), " must be (B, H, T, D)"));
  const Dims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), v.size(3)};
  if (k.size(0) != d.B || k.size(1) != d.H || k.size(3) != d.D || v.size(0) != d.B || v.size(1) != d.H ||
      v.size(2) != d.T_k)
    throw ShapeError(cat(kOp, ": q ", q.shape(), ", k ", k.shape(), ", v ", v.shape(),
                         " must be (B, H, T_q, D), (B, H, T_k, D), (B, H, T_k, D_v)"));
  const Tensor tq = readable(q), tk = readable(k), tv = readable(v);
  return run_flash(
      q.dtype(), d, options,
      [&](auto tag) {
        using F = decltype(tag);
        return std::array<Heads<const F>, 3>{heads_of<const F>(tq, tq.data<F>()), heads_of<const F>(tk, tk.data<F>()),
                                             heads_of<const F>(tv, tv.data<F>())};
      },
      [&](Tensor& out) {
        FlashAttentionNode* node = record<FlashAttentionNode>(out, q, k, v);
        if (node) {
          node->q = tq;
          node->k = tk;
          node->v = tv;
        }
        return node;
      });
}

Tensor flash_self_attention(const Tensor& qkv, int64_t n_heads, const FlashAttentionOptions& options) {
  if (!is_floating(qkv.dtype()))
    throw DTypeError(cat(kOp, ": qkv must be float32 or float64, got ", dtype_name(qkv.dtype()), " ", qkv.shape()));
  if (qkv.dim() != 3 || qkv.size(2) % 3 != 0 || n_heads <= 0 || (qkv.size(2) / 3) % n_heads != 0)
    throw ShapeError(cat(kOp, ": qkv ", qkv.shape(), " must be (B, T, 3C) with C divisible by n_heads = ", n_heads));
  const Tensor x = qkv.contiguous();
  const int64_t C = x.size(2) / 3, D = C / n_heads;
  const Dims d{x.size(0), n_heads, x.size(1), x.size(1), D, D};
  return run_flash(
      x.dtype(), d, options,
      [&](auto tag) {
        using F = decltype(tag);
        return packed_heads<const F>(x.shape(), x.data<F>(), n_heads);
      },
      [&](Tensor& out) {
        FlashAttentionNode* node = record<FlashAttentionNode>(out, qkv);
        if (node) {
          node->q = x;
          node->packed = true;
        }
        return node;
      });
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
    // 9 key blocks for 4 heads: on 2 threads or more, backward runs each head as 2 key ranges.
    flash_case("key-ranges-causal-padding", 17, 17, 3,
               [](auto& o) {
                 std::vector<int> pads(34, 0);
                 std::fill(pads.begin() + 30, pads.end(), 1);  // batch 1's last 4 keys
                 o.causal = true;
                 o.key_padding_mask = mask(pads, {2, 17});
                 o.blocks = {3, 2};
               }),
    flash_case("T1-padded", 1, 1, 3, [](auto& o) { o.key_padding_mask = mask({0, 1}, {2, 1}); }),
    flash_case("one-block-causal", 5, 5, 3, [](auto& o) { o.causal = true; }),
    // The packed entry point over qkv (2, 5, 12): 2 heads of 2. Its backward writes the packed gradient,
    // assigned when the buffer is new; in the second case x is also read through a view whose backward runs
    // first, so flash's contribution is added.
    op_case("attention/flash_self_attention/causal-key-padding-alibi", {{{2, 5, 12}}},
            [](const std::vector<Tensor>& in) {
              FlashAttentionOptions o;
              o.causal = true;
              o.key_padding_mask = padding_2x5();
              o.alibi_slopes = {0.5, 0.25};
              o.blocks = {2, 3};
              return flash_self_attention(in[0], 2, o);
            }),
    op_case("attention/flash_self_attention/dropout-added-to-a-used-buffer", {{{2, 5, 12}}},
            [](const std::vector<Tensor>& in) {
              Generator rng(11);
              FlashAttentionOptions o;
              o.dropout_p = 0.3;
              o.dropout_rng = &rng;
              o.blocks = {3, 2};
              const Tensor out = flash_self_attention(in[0], 2, o);
              return out + transpose(reshape(slice(in[0], 2, 8, 12), {2, 5, 2, 2}), 1, 2);
            }),
    // As above over 17 positions: on 2 threads or more, key ranges whose dQ terms add into a used buffer.
    op_case("attention/flash_self_attention/key-ranges-added-to-a-used-buffer", {{{2, 17, 12}}},
            [](const std::vector<Tensor>& in) {
              FlashAttentionOptions o;
              o.alibi_slopes = {0.5, 0.25};
              o.blocks = {3, 2};
              const Tensor out = flash_self_attention(in[0], 2, o);
              return out + transpose(reshape(slice(in[0], 2, 8, 12), {2, 17, 2, 2}), 1, 2);
            }),
});

}  // namespace

}  // namespace tapegrad
