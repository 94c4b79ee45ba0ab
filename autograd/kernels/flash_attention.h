#pragma once
// Tiled attention of one head, forward and backward, without a (T_q, T_k) matrix: the kernels behind
// autograd/ops/flash_attention.cpp, where the math is derived. Each kernel walks blocks of queries
// against blocks of keys; a block's scores and probabilities live in per-thread scratch of
// block.queries × block.keys numbers, so memory is O(T·D) a head whatever T is. Their block products are
// BLAS calls, except for float32 heads that the register tiles of flash_attention_tiles.h serve (AVX2
// builds, D and D_v multiples of 8), to which they hand the call.
//
// The references beside them compute the same function the plain way, one (T_q, T_k) matrix in double:
// scores, the row softmax, the dropout mask, the products. The fast kernels differ from them by
//   - float arithmetic (in T) where the reference uses double,
//   - the online softmax: each row's max and sum of exps grow block by block, and what was summed with
//     the old max is rescaled by exp(m_old - m_new), where the reference takes one max of the whole row,
//   - the order of the products' additions (BLAS, block by block).
// tests/autograd/test_flash_attention.cpp states the bound (relative 1e-5 in float32, 1e-12 in float64)
// and checks it for every mask and bias, with blocks that do not divide T.
#include <algorithm>
#include <cstdint>

namespace tapegrad {

/// Where one head's matrices live: row r of a matrix starts at data + r · ld (its columns contiguous).
template <class T>
struct HeadMatrix {
  T* data = nullptr;
  int64_t ld = 0;
  T* row(int64_t r) const { return data + r * ld; }
};

/// What shapes the scores of one head besides q kᵀ: all of it is computed per element, never stored.
struct HeadScoring {
  double scale = 1;                  // scores are scale · q_i · k_j
  bool causal = false;               // key j > query i is hidden (top-left aligned, as PyTorch's is_causal)
  const bool* hidden_keys = nullptr; // T_k flags, true = hidden (this batch's row of a key padding mask)
  double alibi_slope = 0;            // adds -slope · |i - j| (0: no bias)
  double dropout_p = 0;              // probabilities dropped with probability p, kept ones scaled by 1/(1-p)
  uint64_t dropout_stream = 0;       // the head's dropout mask: keep(i, j) is a hash of (stream, i, j)
  int64_t first_query = 0;           // forward: the index i of the kernel's query row 0 (a block of the head's
                                     // rows); backward takes whole heads

  /// How many of keys j0 .. j0 + cols the key padding mask hides. The kernels skip a block whose keys are
  /// all hidden (its probabilities are 0): a short row padded to its batch's length costs only its own keys.
  int64_t hidden_keys_in(int64_t j0, int64_t cols) const {
    return hidden_keys == nullptr ? 0 : std::count(hidden_keys + j0, hidden_keys + j0 + cols, true);
  }
  /// True when the scores of queries i0.. against keys j0 .. j0 + cols (`hidden` of them hidden) need more
  /// than scale · q kᵀ: a mask or a bias that reaches into the block.
  bool block_needs_scoring(int64_t i0, int64_t j0, int64_t cols, int64_t hidden) const {
    return hidden > 0 || alibi_slope != 0 || (causal && j0 + cols - 1 > i0);
  }
  /// The keys queries i0 .. i0 + rows can see, from key 0: all T_k, or with the causal mask up to the last.
  int64_t visible_keys(int64_t i0, int64_t rows, int64_t T_k) const { return causal ? std::min(T_k, i0 + rows) : T_k; }
  /// Backward's first block of Bq queries to meet keys j0 .. j0 + cols (`hidden` of them hidden): T_q (none)
  /// when every key is hidden, with the causal mask the block holding query j0 (those before see none of
  /// these keys), else 0.
  int64_t first_query_block(int64_t j0, int64_t cols, int64_t hidden, int64_t Bq, int64_t T_q) const {
    return hidden == cols ? T_q : causal ? j0 / Bq * Bq : 0;
  }
};

/// A finished row of a gradient (n numbers) written to `to`, or added to what it holds when `accumulate`.
template <class T>
void put_gradient_row(const T* from, int64_t n, T* to, bool accumulate) {
  if (accumulate)
    for (int64_t c = 0; c < n; ++c) to[c] += from[c];
  else
    std::copy(from, from + n, to);
}

/// Query and key block sizes (the tests make them small and not dividing T); 0 leaves a size to the kernel
/// that serves the call (kernel_blocks).
struct AttentionBlocks {
  int64_t queries = 0;
  int64_t keys = 0;
};

/// The blocks a call of the kernels for heads of widths D, D_v runs with: `requested`'s sizes, a 0 replaced
/// by the measured size of the kernel that serves it (docs/performance.md): 64 × 64 on the float32 register
/// tiles (flash_attention_tiles.h), whose scores Sᵀ then stay in L1; 128 × 256 on BLAS.
template <class T>
AttentionBlocks kernel_blocks(AttentionBlocks requested, int64_t D, int64_t D_v);

/// Per block of Bq queries (block b: rows b·Bq ..), whether any of its rows of dout is not zero. Backward
/// skips the blocks without: a query whose dO_i is 0 adds nothing to any gradient (dP_i = dO_i Vᵀ = 0 and
/// D_i = <dO_i, O_i> = 0, so dS_i = 0, and dV gets Zᵀ_i · 0), exactly, sign of zero included. A classifier's
/// padded positions send back exactly such rows: they reach the loss through nothing.
template <class T>
void blocks_with_gradient(HeadMatrix<const T> dout, int64_t T_q, int64_t D_v, int64_t Bq, uint8_t* flags);

/// True when dropout keeps probability (i, j) of the head whose mask stream is `stream`. The same call
/// in forward and backward gives the same mask, so it is never stored.
bool dropout_keeps(uint64_t stream, int64_t i, int64_t j, int64_t T_k, double p);

/// out = dropout(softmax(scores)) v for one head, and lse_i = log sum_j exp(s_ij) per query (-inf when
/// every key of row i is hidden; the row's output is then 0).
///   q: (T_q, D), k: (T_k, D), v: (T_k, D_v) -> out: (T_q, D_v), lse: (T_q)
template <class T>
void flash_attention_forward(HeadMatrix<const T> q, HeadMatrix<const T> k, HeadMatrix<const T> v, int64_t T_q,
                             int64_t T_k, int64_t D, int64_t D_v, const HeadScoring& scoring, AttentionBlocks blocks,
                             HeadMatrix<T> out, T* lse);

/// Keys begin .. end of a head (end = -1: to its last key). Backward can split a head into such ranges, run
/// on several threads: each gives dK and dV of its own keys, and its keys' terms of dQ, which the caller
/// sums over the ranges. A range starts on a multiple of the key block, so that the blocks are the whole
/// head's.
struct KeyRange {
  int64_t begin = 0;
  int64_t end = -1;
};

/// The gradients of one head, dq (T_q, D), dk (T_k, D), dv (T_k, D_v), from the forward's out and lse, and
/// dout (T_q, D_v): written, or added to what they hold when `accumulate`. With a key range, only the rows
/// of dk and dv in it are touched, and dq gets the terms of those keys only.
template <class T>
void flash_attention_backward(HeadMatrix<const T> q, HeadMatrix<const T> k, HeadMatrix<const T> v,
                              HeadMatrix<const T> out, const T* lse, HeadMatrix<const T> dout, int64_t T_q, int64_t T_k,
                              int64_t D, int64_t D_v, const HeadScoring& scoring, AttentionBlocks blocks,
                              HeadMatrix<T> dq, HeadMatrix<T> dk, HeadMatrix<T> dv, bool accumulate = false,
                              KeyRange keys = {});

/// The same forward and backward with the whole (T_q, T_k) matrix, in double. dq, dk, dv may be null
/// (forward only).
template <class T>
void attention_reference(HeadMatrix<const T> q, HeadMatrix<const T> k, HeadMatrix<const T> v, int64_t T_q,
                         int64_t T_k, int64_t D, int64_t D_v, const HeadScoring& scoring, HeadMatrix<T> out,
                         HeadMatrix<const T> dout, HeadMatrix<T> dq, HeadMatrix<T> dk, HeadMatrix<T> dv);

}  // namespace tapegrad
