#pragma once
// Flash attention of one float32 head on register tiles (flash_attention_tiles.cpp): the same function and
// arguments as flash_attention_forward / flash_attention_backward (flash_attention.h), which call these when
// flash_tiles_serve says so, computed with the queries along the vector lanes instead of a BLAS call per block.
#include <cstdint>

#include "autograd/kernels/flash_attention.h"

namespace tapegrad {

/// True when this build has the tiled kernels (AVX-512, or AVX2 + FMA) and they serve heads of these widths
/// (multiples of the vectors' lanes: 16 floats with AVX-512, 8 with AVX2).
bool flash_tiles_serve(int64_t D, int64_t D_v);

void flash_attention_forward_tiled(HeadMatrix<const float> q, HeadMatrix<const float> k, HeadMatrix<const float> v,
                                   int64_t T_q, int64_t T_k, int64_t D, int64_t D_v, const HeadScoring& scoring,
                                   AttentionBlocks blocks, HeadMatrix<float> out, float* lse);

/// keys: a range with its end given (not -1).
void flash_attention_backward_tiled(HeadMatrix<const float> q, HeadMatrix<const float> k, HeadMatrix<const float> v,
                                    HeadMatrix<const float> out, const float* lse, HeadMatrix<const float> dout,
                                    int64_t T_q, int64_t T_k, int64_t D, int64_t D_v, const HeadScoring& scoring,
                                    AttentionBlocks blocks, HeadMatrix<float> dq, HeadMatrix<float> dk,
                                    HeadMatrix<float> dv, bool accumulate, KeyRange keys);

}  // namespace tapegrad
