// Flash attention of one float32 head on register tiles, with the queries along the vector lanes.
//
// The BLAS kernels (flash_attention.cpp) call sgemm for every block of scores, which repacks both operands
// each time and leaves the online softmax to passes over rows in memory. Here every product of a block is
// one small loop nest, `tile_product` (register_tiles.h), over a tile of 6 rows × 2 vectors (32 lanes with
// AVX-512, 16 with AVX2) held in 12 registers: each step broadcasts one number per row and loads two
// vectors. The queries run along the lanes throughout: the scores are kept transposed, Sᵀ (keys × queries),
// so that
//   - K and V are read in place, row by row, as the broadcast operand (no packing of K or V at all), and
//     only a block's queries are transposed once (Qt, D × block);
//   - the online softmax is lane-wise: a query's running max, sum and rescale are one lane of a vector, the
//     max over keys is a max of rows, and exp takes a different shift in each lane (exp_lanes);
//   - the output accumulates transposed, Oᵀ += Vᵀ Pᵀ, and is transposed back once at the end.
// The math (the online softmax, D_i = <dO_i, O_i>, FlashAttention-2's order in backward) is derived in
// ops/flash_attention.cpp; the products in the transposed layout are, per head,
//   forward : Sᵀ = s K Qᵀ,  Oᵀ += Vᵀ Pᵀ
//   backward: Sᵀ = s K Qᵀ,  Pᵀ = exp(Sᵀ - L),  dV_j += sum_i Zᵀ_ji dO_i (Zᵀ's rows are keys),
//             dZᵀ = V dOᵀ,  dSᵀ = Pᵀ ⊙ (dPᵀ - D),  dQᵀ += s Kᵀ dSᵀ,  dK += s dSᵀ Q
// and each is tile_product with its operands' strides.
#include "autograd/kernels/flash_attention_tiles.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "autograd/kernels/exp_lanes.h"
#include "autograd/kernels/register_tiles.h"
#include "autograd/kernels/row_reductions.h"
#include "autograd/kernels/scratch.h"

namespace tapegrad {

#ifdef TAPEGRAD_REGISTER_TILES

namespace {

using namespace register_tiles;
constexpr float kInf = std::numeric_limits<float>::infinity();

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

/// The scores Sᵀ of keys j0 .. j0 + cols (St's rows, ld apart) against queries first .. first + lanes (its
/// lanes): a hidden key's row and the keys after a query (causal) become -inf; ALiBi adds -slope·|i - j|.
void score_transposed(float* St, int64_t ld, int64_t first, int64_t lanes, int64_t j0, int64_t cols,
                      const HeadScoring& scoring) {
  const float slope = static_cast<float>(scoring.alibi_slope);
  for (int64_t r = 0; r < cols; ++r) {
    const int64_t j = j0 + r;
    float* row = St + r * ld;
    if (scoring.hidden_keys != nullptr && scoring.hidden_keys[j]) {
      std::fill(row, row + lanes, -kInf);
      continue;
    }
    if (scoring.causal)  // query i = first + lane sees key j only when j <= i
      std::fill(row, row + std::clamp<int64_t>(j - first, 0, lanes), -kInf);
    if (slope != 0)
      for (int64_t lane = 0; lane < lanes; ++lane) row[lane] -= slope * static_cast<float>(std::abs(first + lane - j));
  }
}

/// Multiplies Zᵀ's lanes i < rows (queries first + i, keys j0 + r) by the dropout mask over 1 - p.
void drop_transposed(float* St, int64_t ld, int64_t first, int64_t rows, int64_t j0, int64_t cols, int64_t T_k,
                     const HeadScoring& scoring) {
  const float keep_scale = static_cast<float>(1.0 / (1.0 - scoring.dropout_p));
  for (int64_t r = 0; r < cols; ++r)
    for (int64_t i = 0; i < rows; ++i)
      St[r * ld + i] *=
          dropout_keeps(scoring.dropout_stream, first + i, j0 + r, T_k, scoring.dropout_p) ? keep_scale : 0.0f;
}

struct TileForwardScratch;  // tags of the per-thread blocks (kernels/scratch.h)
struct TileBackwardScratch;

}  // namespace

bool flash_tiles_serve(int64_t D, int64_t D_v) { return D % kLanes == 0 && D_v % kLanes == 0; }

void flash_attention_forward_tiled(HeadMatrix<const float> q, HeadMatrix<const float> k, HeadMatrix<const float> v,
                                   int64_t T_q, int64_t T_k, int64_t D, int64_t D_v, const HeadScoring& scoring,
                                   AttentionBlocks blocks, HeadMatrix<float> out, float* lse) {
  const int64_t Bq = round_up(blocks.queries, kLanes), Bk = blocks.keys;
  float* Qt = scratch<float, TileForwardScratch>((D + D_v + Bk + 3) * Bq);
  float *Ot = Qt + D * Bq, *St = Ot + D_v * Bq, *running_max = St + Bk * Bq, *running_sum = running_max + Bq,
        *rescale = running_sum + Bq;
  const float scale = static_cast<float>(scoring.scale);
  for (int64_t i0 = 0; i0 < T_q; i0 += Bq) {
    const int64_t rows = std::min(Bq, T_q - i0), lanes = round_up(rows, kLanes), vectors = lanes / kLanes;
    const int64_t first = scoring.first_query + i0;  // the absolute index of the block's first query
    transpose_padded(q.row(i0), q.ld, rows, D, Qt, Bq, lanes);
    for (int64_t c = 0; c < D_v; ++c) std::fill(Ot + c * Bq, Ot + c * Bq + lanes, 0.0f);
    std::fill(running_max, running_max + lanes, -kInf);
    std::fill(running_sum, running_sum + lanes, 0.0f);
    const int64_t key_end = scoring.visible_keys(first, rows, T_k);
    for (int64_t j0 = 0; j0 < key_end; j0 += Bk) {
      const int64_t cols = std::min(Bk, key_end - j0), hidden = scoring.hidden_keys_in(j0, cols);
      if (hidden == cols) continue;  // every key hidden: probabilities 0
      tile_product(cols, vectors, D, k.row(j0), k.ld, 1, Qt, Bq, St, Bq, scale, false);  // Sᵀ = s K Qᵀ
      if (scoring.block_needs_scoring(first, j0, cols, hidden))
        score_transposed(St, Bq, first, lanes, j0, cols, scoring);
      // The online softmax, lane by lane: m' = max(m, max_j Sᵀ_j), Pᵀ = exp(Sᵀ - m'), l' = l e^(m - m') +
      // sum_j Pᵀ_j; a lane whose keys are all hidden so far (m' = -inf) is shifted by 0 instead, so its -inf
      // scores give 0, not NaN.
      for (int64_t vec = 0; vec < vectors; ++vec) {
        const int64_t lane = vec * kLanes;
        Lanes block_max = splat<kLanes>(-kInf);
        for (int64_t r = 0; r < cols; ++r) block_max = maximum(block_max, load<kLanes>(St + r * Bq + lane));
        const Lanes old_max = load<kLanes>(running_max + lane), new_max = maximum(old_max, block_max);
        const Lanes shift = zero_minus_infinity(new_max);
        Lanes sum = splat<kLanes>(0.0f);
        for (int64_t r = 0; r < cols; ++r) {
          const Lanes p = exp_lanes(subtract(load<kLanes>(St + r * Bq + lane), shift));
          store(St + r * Bq + lane, p);
          sum = add(sum, p);
        }
        const Lanes factor = exp_lanes(subtract(old_max, shift));  // e^(m - m'): 0 when m = -inf
        store(running_sum + lane, multiply_add(load<kLanes>(running_sum + lane), factor, sum));
        store(running_max + lane, new_max);
        store(rescale + lane, factor);
      }
      for (int64_t c = 0; c < D_v; ++c)  // what Oᵀ summed against the old max, rescaled to the new one
        for (int64_t lane = 0; lane < lanes; lane += kLanes)
          store(Ot + c * Bq + lane, multiply(load<kLanes>(Ot + c * Bq + lane), load<kLanes>(rescale + lane)));
      if (scoring.dropout_p > 0) drop_transposed(St, Bq, first, rows, j0, cols, T_k, scoring);
      tile_product(D_v, vectors, cols, v.row(j0), 1, v.ld, St, Bq, Ot, Bq, 1.0f, true);  // Oᵀ += Vᵀ Zᵀ
    }
    for (int64_t i = 0; i < rows; ++i) {
      float* o = out.row(i0 + i);
      if (running_sum[i] == 0.0f) {  // nothing visible: the output row stays 0
        std::fill(o, o + D_v, 0.0f);
        lse[i0 + i] = -kInf;
        continue;
      }
      const float inv = 1.0f / running_sum[i];
      for (int64_t c = 0; c < D_v; ++c) o[c] = Ot[c * Bq + i] * inv;
      lse[i0 + i] = running_max[i] + std::log(running_sum[i]);
    }
  }
}

void flash_attention_backward_tiled(HeadMatrix<const float> q, HeadMatrix<const float> k, HeadMatrix<const float> v,
                                    HeadMatrix<const float> out, const float* lse, HeadMatrix<const float> dout,
                                    int64_t T_q, int64_t T_k, int64_t D, int64_t D_v, const HeadScoring& scoring,
                                    AttentionBlocks blocks, HeadMatrix<float> dq, HeadMatrix<float> dk,
                                    HeadMatrix<float> dv, bool accumulate, KeyRange keys) {
  const int64_t Bq = round_up(blocks.queries, kLanes), Bk = blocks.keys, T_pad = round_up(T_q, Bq);
  // The whole head's queries transposed, block by block: Qᵀ, dOᵀ and dQᵀ (summed over key blocks) hold the
  // (D × Bq) panel of query block b at b·D·Bq, rows Bq apart (rows T apart would fall into the same few
  // cache sets). Then per block Sᵀ/Pᵀ, dPᵀ/dSᵀ and the dropped Zᵀ, and a key block's dK and dV. Q and dO
  // are also copied as contiguous rows (Qc, dOc), and each key block's K and V (Kc, Vc): read in place,
  // their rows lie a packed projection's 3C or C apart, and a block's rows shared a few L1 sets, which cost
  // 10-20% of the backward (docs/performance.md).
  float* Qt = scratch<float, TileBackwardScratch>((3 * D + 2 * D_v + 2) * T_pad + 3 * Bk * Bq + 2 * Bk * (D + D_v));
  float *dOt = Qt + D * T_pad, *dQt = dOt + D_v * T_pad, *shift = dQt + D * T_pad, *row_dot = shift + T_pad,
        *St = row_dot + T_pad, *dPt = St + Bk * Bq, *Zt = dPt + Bk * Bq, *dK = Zt + Bk * Bq, *dV = dK + Bk * D;
  float *Qc = dV + Bk * D_v, *dOc = Qc + D * T_pad, *Kc = dOc + D_v * T_pad, *Vc = Kc + Bk * D;
  const float scale = static_cast<float>(scoring.scale);
  uint8_t* has_gradient = scratch<uint8_t, TileBackwardScratch>(T_pad / Bq);
  blocks_with_gradient(dout, T_q, D_v, Bq, has_gradient);
  for (int64_t i0 = 0; i0 < T_q; i0 += Bq) {
    const int64_t rows = std::min(Bq, T_q - i0);
    transpose_padded(q.row(i0), q.ld, rows, D, Qt + i0 * D, Bq, Bq);
    transpose_padded(dout.row(i0), dout.ld, rows, D_v, dOt + i0 * D_v, Bq, Bq);
  }
  for (int64_t i = 0; i < T_q; ++i) {
    std::copy(q.row(i), q.row(i) + D, Qc + i * D);
    std::copy(dout.row(i), dout.row(i) + D_v, dOc + i * D_v);
  }
  std::fill(dQt, dQt + D * T_pad, 0.0f);
  for (int64_t i = 0; i < T_pad; ++i) {
    // P = exp(S - L); a row with nothing visible (L = -inf) and the padding lanes take L = +inf: P = 0.
    shift[i] = i < T_q && lse[i] != -kInf ? lse[i] : kInf;
    // D_i = <dO_i, O_i>, which equals sum_j dP_ij P_ij (see the op)
    row_dot[i] = i < T_q ? static_cast<float>(tapegrad::row_dot(dout.row(i), out.row(i), D_v, kContiguous)) : 0.0f;
  }
  for (int64_t j0 = keys.begin; j0 < keys.end; j0 += Bk) {
    const int64_t cols = std::min(Bk, keys.end - j0), hidden = scoring.hidden_keys_in(j0, cols);
    std::fill(dK, dK + cols * D, 0.0f);
    std::fill(dV, dV + cols * D_v, 0.0f);
    for (int64_t c = 0; c < cols; ++c) {
      std::copy(k.row(j0 + c), k.row(j0 + c) + D, Kc + c * D);
      std::copy(v.row(j0 + c), v.row(j0 + c) + D_v, Vc + c * D_v);
    }
    // Only the query blocks that can see these keys (a block hidden whole keeps its gradients at 0).
    for (int64_t i0 = scoring.first_query_block(j0, cols, hidden, Bq, T_q); i0 < T_q; i0 += Bq) {
      if (!has_gradient[i0 / Bq]) continue;
      const int64_t rows = std::min(Bq, T_q - i0), lanes = round_up(rows, kLanes), vectors = lanes / kLanes;
      tile_product(cols, vectors, D, Kc, D, 1, Qt + i0 * D, Bq, St, Bq, scale, false);  // Sᵀ = s K Qᵀ
      if (scoring.block_needs_scoring(i0, j0, cols, hidden))
        score_transposed(St, Bq, i0, lanes, j0, cols, scoring);
      for (int64_t r = 0; r < cols; ++r)  // Pᵀ = exp(Sᵀ - L), the forward's probabilities
        for (int64_t lane = 0; lane < lanes; lane += kLanes) {
          store(St + r * Bq + lane,
                exp_lanes(subtract(load<kLanes>(St + r * Bq + lane), load<kLanes>(shift + i0 + lane))));
        }
      const float* Z = St;  // the dropped probabilities Zᵀ
      if (scoring.dropout_p > 0) {
        for (int64_t r = 0; r < cols; ++r) std::copy(St + r * Bq, St + r * Bq + rows, Zt + r * Bq);
        drop_transposed(Zt, Bq, i0, rows, j0, cols, T_k, scoring);
        Z = Zt;
      }
      tile_product(cols, D_v / kLanes, rows, Z, Bq, 1, dOc + i0 * D_v, D_v, dV, D_v, 1.0f, true);  // dV += Z dO
      // dZᵀ = V dOᵀ
      tile_product(cols, vectors, D_v, Vc, D_v, 1, dOt + i0 * D_v, Bq, dPt, Bq, 1.0f, false);
      if (scoring.dropout_p > 0) drop_transposed(dPt, Bq, i0, rows, j0, cols, T_k, scoring);     // dPᵀ
      for (int64_t r = 0; r < cols; ++r)  // dSᵀ = Pᵀ ⊙ (dPᵀ - D), over dPᵀ
        for (int64_t lane = 0; lane < lanes; lane += kLanes) {
          const Lanes dp = subtract(load<kLanes>(dPt + r * Bq + lane), load<kLanes>(row_dot + i0 + lane));
          store(dPt + r * Bq + lane, multiply(load<kLanes>(St + r * Bq + lane), dp));
        }
      // dQᵀ += s Kᵀ dSᵀ
      tile_product(D, vectors, cols, Kc, 1, D, dPt, Bq, dQt + i0 * D, Bq, scale, true);
      tile_product(cols, D / kLanes, rows, dPt, Bq, 1, Qc + i0 * D, D, dK, D, scale, true);      // dK += s dSᵀ Q
    }
    for (int64_t c = 0; c < cols; ++c) {
      put_gradient_row(dK + c * D, D, dk.row(j0 + c), accumulate);
      put_gradient_row(dV + c * D_v, D_v, dv.row(j0 + c), accumulate);
    }
  }
  for (int64_t i = 0; i < T_q; ++i) {
    const float* from = dQt + i / Bq * Bq * D + i % Bq;  // row i of dQ: column i % Bq of its block's panel
    float* to = dq.row(i);
    for (int64_t c = 0; c < D; ++c) to[c] = accumulate ? to[c] + from[c * Bq] : from[c * Bq];
  }
}

#else  // no AVX2 + FMA nor AVX-512: the BLAS kernels run

bool flash_tiles_serve(int64_t, int64_t) { return false; }

void flash_attention_forward_tiled(HeadMatrix<const float>, HeadMatrix<const float>, HeadMatrix<const float>, int64_t,
                                   int64_t, int64_t, int64_t, const HeadScoring&, AttentionBlocks, HeadMatrix<float>,
                                   float*) {
  throw std::logic_error("flash_attention_forward_tiled: not built for this CPU (flash_tiles_serve is false)");
}

void flash_attention_backward_tiled(HeadMatrix<const float>, HeadMatrix<const float>, HeadMatrix<const float>,
                                    HeadMatrix<const float>, const float*, HeadMatrix<const float>, int64_t, int64_t,
                                    int64_t, int64_t, const HeadScoring&, AttentionBlocks, HeadMatrix<float>,
                                    HeadMatrix<float>, HeadMatrix<float>, bool, KeyRange) {
  throw std::logic_error("flash_attention_backward_tiled: not built for this CPU (flash_tiles_serve is false)");
}

#endif

}  // namespace tapegrad
