// Tiled attention of one head (see flash_attention.h; the math is derived in ops/flash_attention.cpp).
// Each block's products go through gemm_on_this_thread: the register tiles where their widths allow, which
// also spares the heads whose width the tiled kernels do not serve (D = 8 on an AVX-512 build) OpenBLAS's
// small-matrix kernels for AVX-512, which allocate on every call (a heap allocation a product a step).
#include "autograd/kernels/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>
#include <vector>

#include "autograd/kernels/exp.h"
#include "autograd/kernels/flash_attention_tiles.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/row_reductions.h"
#include "autograd/kernels/scratch.h"

namespace tapegrad {

namespace {

template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

struct ForwardScratch;  // tags of the per-thread blocks (kernels/scratch.h)
struct BackwardScratch;

uint64_t mix64(uint64_t x) {  // splitmix64's finaliser: every input bit reaches every output bit
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// The key padding mask of keys j0 .. j0 + cols as an additive row (-inf hidden, 0 seen), so that rows
/// apply it as one vectorised add.
template <class T>
void key_bias_row(const HeadScoring& scoring, int64_t j0, int64_t cols, T* bias) {
  for (int64_t c = 0; c < cols; ++c) bias[c] = scoring.hidden_keys[j0 + c] ? kNegInf<T> : T(0);
}

/// Row i of a block of scores, keys j0 .. j0 + cols: the key padding (key_bias, or null when the block hides
/// no key) and the causal mask as -inf, the ALiBi bias added.
template <class T>
void score_row(T* row, int64_t i, int64_t j0, int64_t cols, const T* key_bias, const HeadScoring& scoring) {
  if (key_bias != nullptr)
    for (int64_t c = 0; c < cols; ++c) row[c] += key_bias[c];
  if (scoring.causal)  // keys j > i, the columns from i - j0 + 1 on
    for (int64_t c = std::max<int64_t>(0, i - j0 + 1); c < cols; ++c) row[c] = kNegInf<T>;
  if (scoring.alibi_slope != 0) {
    const T slope = static_cast<T>(scoring.alibi_slope);
    for (int64_t c = 0; c < cols; ++c) row[c] -= slope * static_cast<T>(std::abs(i - j0 - c));
  }
}

/// p = exp(s - m) over a row; -inf scores give 0, and m = -inf (a row with nothing visible) gives zeros.
template <class T>
void exp_row(const T* s, T m, T* p, int64_t n) {
  if (m == kNegInf<T>) {
    std::fill(p, p + n, T(0));
    return;
  }
  if constexpr (std::is_same_v<T, float>)
    exp_shifted_fast(s, m, p, n);
  else
    for (int64_t c = 0; c < n; ++c) p[c] = std::exp(s[c] - m);
}

/// Multiplies row i's probabilities (keys j0 ..) by the dropout mask over 1 - p: 0 or 1/(1-p) each.
template <class T>
void drop_row(T* row, int64_t i, int64_t j0, int64_t cols, int64_t T_k, const HeadScoring& scoring) {
  const T keep_scale = static_cast<T>(1.0 / (1.0 - scoring.dropout_p));
  for (int64_t c = 0; c < cols; ++c)
    row[c] = dropout_keeps(scoring.dropout_stream, i, j0 + c, T_k, scoring.dropout_p) ? row[c] * keep_scale : T(0);
}

}  // namespace

bool dropout_keeps(uint64_t stream, int64_t i, int64_t j, int64_t T_k, double p) {
  const uint64_t index = static_cast<uint64_t>(i) * static_cast<uint64_t>(T_k) + static_cast<uint64_t>(j);
  const uint64_t bits = mix64(stream + index * 0x9E3779B97F4A7C15ull);
  return static_cast<double>(bits >> 11) * 0x1.0p-53 >= p;  // a uniform in [0, 1) from 53 bits
}

template <class T>
void blocks_with_gradient(HeadMatrix<const T> dout, int64_t T_q, int64_t D_v, int64_t Bq, uint8_t* flags) {
  for (int64_t i0 = 0; i0 < T_q; i0 += Bq) {
    bool any = false;
    for (int64_t i = i0; i < std::min(T_q, i0 + Bq) && !any; ++i)
      any = row_has_nonzero(dout.row(i), D_v);
    flags[i0 / Bq] = any;
  }
}

template <class T>
AttentionBlocks kernel_blocks(AttentionBlocks requested, int64_t D, int64_t D_v) {
  const bool tiles = std::is_same_v<T, float> && flash_tiles_serve(D, D_v);
  return {requested.queries > 0 ? requested.queries : tiles ? 64 : 128,
          requested.keys > 0 ? requested.keys : tiles ? 64 : 256};
}

template <class T>
void flash_attention_forward(HeadMatrix<const T> q, HeadMatrix<const T> k, HeadMatrix<const T> v, int64_t T_q,
                             int64_t T_k, int64_t D, int64_t D_v, const HeadScoring& scoring, AttentionBlocks blocks,
                             HeadMatrix<T> out, T* lse) {
  blocks = kernel_blocks<T>(blocks, D, D_v);
  if constexpr (std::is_same_v<T, float>)
    if (flash_tiles_serve(D, D_v))
      return flash_attention_forward_tiled(q, k, v, T_q, T_k, D, D_v, scoring, blocks, out, lse);
  const int64_t Bq = blocks.queries, Bk = blocks.keys;
  T* S = scratch<T, ForwardScratch>(2 * Bq * Bk + 2 * Bq + Bk);
  T *P = S + Bq * Bk, *running_max = P + Bq * Bk, *running_sum = running_max + Bq, *key_bias = running_sum + Bq;
  const T scale = static_cast<T>(scoring.scale);
  for (int64_t i0 = 0; i0 < T_q; i0 += Bq) {
    const int64_t rows = std::min(Bq, T_q - i0);
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(out.row(i0 + r), out.row(i0 + r) + D_v, T(0));
      running_max[r] = kNegInf<T>;
      running_sum[r] = 0;
    }
    const int64_t first = scoring.first_query + i0;  // the absolute index of the block's first query
    const int64_t key_end = scoring.visible_keys(first, rows, T_k);
    for (int64_t j0 = 0; j0 < key_end; j0 += Bk) {
      const int64_t cols = std::min(Bk, key_end - j0), hidden = scoring.hidden_keys_in(j0, cols);
      if (hidden == cols) continue;
      if (hidden > 0) key_bias_row(scoring, j0, cols, key_bias);
      // s Q Kᵀ
      gemm_on_this_thread(false, true, rows, cols, D, scale, q.row(i0), q.ld, k.row(j0), k.ld, T(0), S, cols);
      const bool scored = scoring.block_needs_scoring(first, j0, cols, hidden);
      for (int64_t r = 0; r < rows; ++r) {
        T *s = S + r * cols, *p = P + r * cols;
        if (scored) score_row(s, first + r, j0, cols, hidden > 0 ? key_bias : nullptr, scoring);
        const T m = std::max(running_max[r], row_max(s, cols, kContiguous));
        exp_row(s, m, p, cols);
        // What was summed against the old max is rescaled to the new one: exp(m_old - m) (0 at first).
        const T rescale = m == kNegInf<T> ? T(1) : std::exp(running_max[r] - m);
        running_sum[r] = running_sum[r] * rescale + static_cast<T>(row_sum(p, cols, kContiguous));
        running_max[r] = m;
        if (rescale != T(1))
          for (T *o = out.row(i0 + r), *end = o + D_v; o < end; ++o) *o *= rescale;
        if (scoring.dropout_p > 0) drop_row(p, first + r, j0, cols, T_k, scoring);
      }
      // += P V
      gemm_on_this_thread(false, false, rows, D_v, cols, T(1), P, cols, v.row(j0), v.ld, T(1), out.row(i0), out.ld);
    }
    for (int64_t r = 0; r < rows; ++r) {
      if (running_sum[r] == T(0)) {  // nothing visible: the output row stays 0
        lse[i0 + r] = kNegInf<T>;
        continue;
      }
      const T inv = T(1) / running_sum[r];
      for (T *o = out.row(i0 + r), *end = o + D_v; o < end; ++o) *o *= inv;
      lse[i0 + r] = running_max[r] + std::log(running_sum[r]);
    }
  }
}

template <class T>
void flash_attention_backward(HeadMatrix<const T> q, HeadMatrix<const T> k, HeadMatrix<const T> v,
                              HeadMatrix<const T> out, const T* lse, HeadMatrix<const T> dout, int64_t T_q, int64_t T_k,
                              int64_t D, int64_t D_v, const HeadScoring& scoring, AttentionBlocks blocks,
                              HeadMatrix<T> dq, HeadMatrix<T> dk, HeadMatrix<T> dv, bool accumulate, KeyRange keys) {
  blocks = kernel_blocks<T>(blocks, D, D_v);
  const int64_t key_end = keys.end < 0 ? T_k : std::min(keys.end, T_k);
  if constexpr (std::is_same_v<T, float>)
    if (flash_tiles_serve(D, D_v))
      return flash_attention_backward_tiled(q, k, v, out, lse, dout, T_q, T_k, D, D_v, scoring, blocks, dq, dk, dv,
                                            accumulate, {keys.begin, key_end});
  const int64_t Bq = blocks.queries, Bk = blocks.keys;
  T* S = scratch<T, BackwardScratch>(2 * Bq * Bk + T_q + T_q * D + Bk * (D + D_v + 1));
  T *P = S + Bq * Bk, *row_dot = P + Bq * Bk, *dQ = row_dot + T_q, *dK = dQ + T_q * D, *dV = dK + Bk * D,
    *key_bias = dV + Bk * D_v;
  uint8_t* has_gradient = scratch<uint8_t, BackwardScratch>((T_q + Bq - 1) / Bq);
  blocks_with_gradient(dout, T_q, D_v, Bq, has_gradient);
  const T scale = static_cast<T>(scoring.scale);
  for (int64_t i = 0; i < T_q; ++i) {  // D_i = <dO_i, O_i>, which equals sum_j dP_ij P_ij (see the op)
    row_dot[i] = static_cast<T>(tapegrad::row_dot(dout.row(i), out.row(i), D_v, kContiguous));
  }
  std::fill(dQ, dQ + T_q * D, T(0));
  for (int64_t j0 = keys.begin; j0 < key_end; j0 += Bk) {
    const int64_t cols = std::min(Bk, key_end - j0), hidden = scoring.hidden_keys_in(j0, cols);
    std::fill(dK, dK + cols * D, T(0));
    std::fill(dV, dV + cols * D_v, T(0));
    if (hidden > 0) key_bias_row(scoring, j0, cols, key_bias);
    // Only the query blocks that can see these keys (a block hidden whole keeps its gradients at 0).
    for (int64_t i0 = scoring.first_query_block(j0, cols, hidden, Bq, T_q); i0 < T_q; i0 += Bq) {
      if (!has_gradient[i0 / Bq]) continue;
      const int64_t rows = std::min(Bq, T_q - i0);
      // s Q Kᵀ
      gemm_on_this_thread(false, true, rows, cols, D, scale, q.row(i0), q.ld, k.row(j0), k.ld, T(0), S, cols);
      const bool scored = scoring.block_needs_scoring(i0, j0, cols, hidden);
      for (int64_t r = 0; r < rows; ++r) {  // P = exp(S - lse): the forward's probabilities
        if (scored) score_row(S + r * cols, i0 + r, j0, cols, hidden > 0 ? key_bias : nullptr, scoring);
        exp_row(S + r * cols, lse[i0 + r], P + r * cols, cols);
      }
      const T* Z = P;  // the dropped probabilities, dropout(P), over S's memory when there is dropout
      if (scoring.dropout_p > 0) {
        std::copy(P, P + rows * cols, S);
        for (int64_t r = 0; r < rows; ++r) drop_row(S + r * cols, i0 + r, j0, cols, T_k, scoring);
        Z = S;
      }
      // dV += Zᵀ dO
      gemm_on_this_thread(true, false, cols, D_v, rows, T(1), Z, cols, dout.row(i0), dout.ld, T(1), dV, D_v);
      // dZ
      gemm_on_this_thread(false, true, rows, cols, D_v, T(1), dout.row(i0), dout.ld, v.row(j0), v.ld, T(0), S, cols);
      for (int64_t r = 0; r < rows; ++r) {
        T *ds = S + r * cols, *p = P + r * cols;
        if (scoring.dropout_p > 0) drop_row(ds, i0 + r, j0, cols, T_k, scoring);  // dP = dZ ⊙ mask / (1-p)
        const T d = row_dot[i0 + r];
        for (int64_t c = 0; c < cols; ++c) ds[c] = p[c] * (ds[c] - d);  // dS = P ⊙ (dP - D_i)
      }
      // dQ += s dS K
      gemm_on_this_thread(false, false, rows, D, cols, scale, S, cols, k.row(j0), k.ld, T(1), dQ + i0 * D, D);
      // dK += s dSᵀ Q
      gemm_on_this_thread(true, false, cols, D, rows, scale, S, cols, q.row(i0), q.ld, T(1), dK, D);
    }
    for (int64_t c = 0; c < cols; ++c) {
      put_gradient_row(dK + c * D, D, dk.row(j0 + c), accumulate);
      put_gradient_row(dV + c * D_v, D_v, dv.row(j0 + c), accumulate);
    }
  }
  for (int64_t i = 0; i < T_q; ++i) put_gradient_row(dQ + i * D, D, dq.row(i), accumulate);
}

template <class T>
void attention_reference(HeadMatrix<const T> q, HeadMatrix<const T> k, HeadMatrix<const T> v, int64_t T_q,
                         int64_t T_k, int64_t D, int64_t D_v, const HeadScoring& scoring, HeadMatrix<T> out,
                         HeadMatrix<const T> dout, HeadMatrix<T> dq, HeadMatrix<T> dk, HeadMatrix<T> dv) {
  const double inf = std::numeric_limits<double>::infinity(), keep_scale = 1.0 / (1.0 - scoring.dropout_p);
  std::vector<double> P(static_cast<size_t>(T_q * T_k)), mask(P.size(), 1.0);
  for (int64_t i = 0; i < T_q; ++i) {
    double m = -inf;
    for (int64_t j = 0; j < T_k; ++j) {
      double s = 0;
      for (int64_t c = 0; c < D; ++c) s += static_cast<double>(q.row(i)[c]) * k.row(j)[c];
      s *= scoring.scale;
      if ((scoring.causal && j > i) || (scoring.hidden_keys && scoring.hidden_keys[j])) s = -inf;
      else s -= scoring.alibi_slope * static_cast<double>(std::abs(i - j));
      P[i * T_k + j] = s;
      m = std::max(m, s);
      if (scoring.dropout_p > 0 && !dropout_keeps(scoring.dropout_stream, i, j, T_k, scoring.dropout_p))
        mask[i * T_k + j] = 0;
    }
    double sum = 0;
    for (int64_t j = 0; j < T_k; ++j) sum += m == -inf ? 0 : std::exp(P[i * T_k + j] - m);
    for (int64_t j = 0; j < T_k; ++j) P[i * T_k + j] = m == -inf ? 0 : std::exp(P[i * T_k + j] - m) / sum;
  }
  auto dropped = [&](int64_t i, int64_t j) { return P[i * T_k + j] * mask[i * T_k + j] * keep_scale; };
  for (int64_t i = 0; i < T_q; ++i)
    for (int64_t c = 0; c < D_v; ++c) {
      double sum = 0;
      for (int64_t j = 0; j < T_k; ++j) sum += dropped(i, j) * v.row(j)[c];
      out.row(i)[c] = static_cast<T>(sum);
    }
  if (dq.data == nullptr) return;
  // dP = (dO Vᵀ) ⊙ mask / (1-p);  dS = P ⊙ (dP - rowsum(dP ⊙ P));  dq = s dS k, dk = s dSᵀ q, dv = Zᵀ dO
  std::vector<double> dS(P.size());
  for (int64_t i = 0; i < T_q; ++i) {
    double row_dot = 0;
    for (int64_t j = 0; j < T_k; ++j) {
      double dp = 0;
      for (int64_t c = 0; c < D_v; ++c) dp += static_cast<double>(dout.row(i)[c]) * v.row(j)[c];
      dS[i * T_k + j] = dp * mask[i * T_k + j] * keep_scale;
      row_dot += dS[i * T_k + j] * P[i * T_k + j];
    }
    for (int64_t j = 0; j < T_k; ++j) dS[i * T_k + j] = P[i * T_k + j] * (dS[i * T_k + j] - row_dot);
  }
  for (int64_t i = 0; i < T_q; ++i)
    for (int64_t c = 0; c < D; ++c) {
      double sum = 0;
      for (int64_t j = 0; j < T_k; ++j) sum += dS[i * T_k + j] * k.row(j)[c];
      dq.row(i)[c] = static_cast<T>(scoring.scale * sum);
    }
  for (int64_t j = 0; j < T_k; ++j) {
    for (int64_t c = 0; c < D; ++c) {
      double sum = 0;
      for (int64_t i = 0; i < T_q; ++i) sum += dS[i * T_k + j] * q.row(i)[c];
      dk.row(j)[c] = static_cast<T>(scoring.scale * sum);
    }
    for (int64_t c = 0; c < D_v; ++c) {
      double sum = 0;
      for (int64_t i = 0; i < T_q; ++i) sum += dropped(i, j) * dout.row(i)[c];
      dv.row(j)[c] = static_cast<T>(sum);
    }
  }
}

#define TAPEGRAD_FLASH_ATTENTION(T)                                                                                   \
  template AttentionBlocks kernel_blocks<T>(AttentionBlocks, int64_t, int64_t);                                       \
  template void blocks_with_gradient<T>(HeadMatrix<const T>, int64_t, int64_t, int64_t, uint8_t*);                   \
  template void flash_attention_forward<T>(HeadMatrix<const T>, HeadMatrix<const T>, HeadMatrix<const T>, int64_t,     \
                                           int64_t, int64_t, int64_t, const HeadScoring&, AttentionBlocks,            \
                                           HeadMatrix<T>, T*);                                                         \
  template void flash_attention_backward<T>(HeadMatrix<const T>, HeadMatrix<const T>, HeadMatrix<const T>,             \
                                            HeadMatrix<const T>, const T*, HeadMatrix<const T>, int64_t, int64_t,     \
                                            int64_t, int64_t, const HeadScoring&, AttentionBlocks, HeadMatrix<T>,     \
                                            HeadMatrix<T>, HeadMatrix<T>, bool, KeyRange);                             \
  template void attention_reference<T>(HeadMatrix<const T>, HeadMatrix<const T>, HeadMatrix<const T>, int64_t,        \
                                       int64_t, int64_t, int64_t, const HeadScoring&, HeadMatrix<T>,                  \
                                       HeadMatrix<const T>, HeadMatrix<T>, HeadMatrix<T>, HeadMatrix<T>);
TAPEGRAD_FLASH_ATTENTION(float)
TAPEGRAD_FLASH_ATTENTION(double)
#undef TAPEGRAD_FLASH_ATTENTION

}  // namespace tapegrad
