#pragma once
// Flash attention's heads on the threads: where each head of an operand lives, and the forward and backward
// of every head of a call spread over tapegrad's pool (work items, key ranges, the dQ terms they leave). The op
// (flash_attention.cpp) records and checks; the kernels (kernels/flash_attention.h) compute one head.
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "autograd/kernels/flash_attention.h"
#include "autograd/kernels/scratch.h"
#include "autograd/parallel.h"
#include "autograd/tensor.h"

namespace tapegrad::flash_heads {

/// Where the heads of a (B, H, T, D) operand live: head bh's (T, D) matrix starts at
/// data + b·batch_stride + h·head_stride (b = bh / H, h = bh % H), its rows ld apart.
template <class T>
struct Heads {
  T* data;
  int64_t batch_stride, head_stride, ld, H;
  HeadMatrix<T> at(int64_t bh) const { return {data + bh / H * batch_stride + bh % H * head_stride, ld}; }
};

/// The heads of t (B, H, T, D), read through its strides.
template <class T>
Heads<T> heads_of(const Tensor& t, T* base) {
  return {base, t.strides()[0], t.strides()[1], t.strides()[2], t.size(1)};
}

/// The heads of q, k and v in a packed projection [q | k | v] (B, T, 3C) at base: head h of q is the (T, D)
/// block at column h·D, leading dim 3C, and k and v are the blocks C and 2C further on.
template <class T>
std::array<Heads<T>, 3> packed_heads(const Shape& packed, T* base, int64_t H) {
  const int64_t T_ = packed[1], C = packed[2] / 3;
  const Heads<T> q{base, T_ * 3 * C, C / H, 3 * C, H};
  return {q, Heads<T>{base + C, q.batch_stride, q.head_stride, q.ld, H},
          Heads<T>{base + 2 * C, q.batch_stride, q.head_stride, q.ld, H}};
}

struct Dims {
  int64_t B, H, T_q, T_k, D, D_v;
};

/// The scoring of head bh (b = bh / H, h = bh % H) of a call.
struct CallScoring {
  double scale = 1;
  bool causal = false;
  const bool* padding = nullptr;  // (B, T_k) or null
  const std::vector<double>* slopes = nullptr;
  double dropout_p = 0;
  uint64_t seed = 0;
  int64_t H = 1, T_q = 0, T_k = 0;
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

/// out (its heads ho) and lse (B, H, T_q) of every head; work items are (head, block of queries), independent
/// rows of the output.
template <class F>
void forward_heads(const std::array<Heads<const F>, 3>& qkv, const Heads<F>& ho, F* lse, const Dims& d,
                   const CallScoring& call, AttentionBlocks blocks) {
  // Named references, not structured bindings: C++17 lambdas cannot capture bindings (clang refuses).
  const Heads<const F>&hq = qkv[0], &hk = qkv[1], &hv = qkv[2];
  const int64_t query_blocks = (d.T_q + blocks.queries - 1) / blocks.queries;
  // Dynamic: items differ in cost (a padded row's keys are skipped, the causal mask skips blocks).
  const int64_t grain = grain_for_flops(4 * blocks.queries * d.T_k * d.D);
  parallel_for_each_dynamic(d.B * d.H * query_blocks, grain, [&](int64_t first, int64_t last) {
    for (int64_t item = first; item < last; ++item) {
      const int64_t bh = item / query_blocks, i0 = item % query_blocks * blocks.queries;
      HeadScoring s = call.head(bh);
      s.first_query = i0;
      flash_attention_forward<F>({hq.at(bh).row(i0), hq.ld}, hk.at(bh), hv.at(bh), std::min(blocks.queries, d.T_q - i0),
                                 d.T_k, d.D, d.D_v, s, blocks, {ho.at(bh).row(i0), ho.ld}, lse + bh * d.T_q + i0);
    }
  });
}

/// How many key ranges backward splits each head into: 1, unless there are too few heads for the threads
/// to finish together (a long sequence in a small batch: on 2 threads, 4 heads left a thread idle for 7% of
/// the backward; on 8 threads, half of them throughout). Then about 4 items a thread, each range at least 4
/// key blocks, so that a range's own set-up (its copies of the head's queries) stays small beside it.
inline int64_t key_ranges_per_head(const Dims& d, int64_t key_block) {
  const int64_t threads = num_threads(), heads = d.B * d.H;
  if (threads == 1 || heads >= 4 * threads) return 1;
  return std::max<int64_t>(1, std::min((4 * threads + heads - 1) / heads, d.T_k / (4 * key_block)));
}

struct PartialDqScratch;  // tag of the caller's block of the key ranges' dQ terms (kernels/scratch.h)

/// The gradients of every head into dqkv's heads (written, or added when accumulate). Items are heads, or
/// (head, key range) pairs when key_ranges_per_head says so: each range writes dK and dV of its own keys, and
/// dQ is the sum over ranges of each range's terms, range 0's written (or added) in place, the others' kept
/// apart and added after, in range order (so the result does not depend on which thread ran what).
template <class F>
void backward_heads(const std::array<Heads<const F>, 3>& qkv, const Heads<const F>& ho, const F* lse,
                    const Heads<const F>& hdo, const Dims& d, const CallScoring& call, AttentionBlocks blocks,
                    const std::array<Heads<F>, 3>& dqkv, bool accumulate) {
  const Heads<const F>&hq = qkv[0], &hk = qkv[1], &hv = qkv[2];
  const Heads<F>&hdq = dqkv[0], &hdk = dqkv[1], &hdv = dqkv[2];
  const int64_t Bk = kernel_blocks<F>(blocks, d.D, d.D_v).keys, key_blocks = (d.T_k + Bk - 1) / Bk;
  const int64_t ranges = key_ranges_per_head(d, Bk), heads = d.B * d.H;
  // The dQ terms of range r > 0 of head bh: a (T_q, D) matrix of the caller's scratch.
  F* partial = ranges > 1 ? scratch<F, PartialDqScratch>((ranges - 1) * heads * d.T_q * d.D) : nullptr;
  const auto partial_dq = [&](int64_t bh, int64_t r) { return partial + ((bh * (ranges - 1) + r - 1) * d.T_q) * d.D; };
  const auto run = [&](int64_t bh, int64_t r) {
    const KeyRange keys{key_blocks * r / ranges * Bk, std::min(d.T_k, key_blocks * (r + 1) / ranges * Bk)};
    HeadMatrix<F> dq = hdq.at(bh);
    if (r > 0) {
      dq = {partial_dq(bh, r), d.D};
      if (accumulate) std::fill(dq.data, dq.data + d.T_q * d.D, F(0));  // the kernel adds its terms to these
    }
    flash_attention_backward<F>(hq.at(bh), hk.at(bh), hv.at(bh), ho.at(bh), lse + bh * d.T_q, hdo.at(bh), d.T_q, d.T_k,
                                d.D, d.D_v, call.head(bh), blocks, dq, hdk.at(bh), hdv.at(bh), accumulate, keys);
  };
  parallel_for_each_dynamic(heads * ranges, grain_for_flops(10 * d.T_q * d.T_k / ranges * d.D),
                            [&](int64_t first, int64_t last) {
                              for (int64_t item = first; item < last; ++item) run(item / ranges, item % ranges);
                            });
  if (ranges == 1) return;
  parallel_for(heads * d.T_q, grain_for_elements(d.D * (ranges - 1)), [&](int64_t first, int64_t last) {
    for (int64_t row = first; row < last; ++row) {
      const int64_t bh = row / d.T_q, i = row % d.T_q;
      F* to = hdq.at(bh).row(i);
      for (int64_t r = 1; r < ranges; ++r) {
        const F* from = partial_dq(bh, r) + i * d.D;
        for (int64_t c = 0; c < d.D; ++c) to[c] += from[c];
      }
    }
  });
}

}  // namespace tapegrad::flash_heads
