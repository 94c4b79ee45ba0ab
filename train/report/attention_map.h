#pragma once
// attention.svg: a model's attention probabilities as heatmaps, one per layer and head (a standalone
// SVG, svg.h). Written atomically and durably (write_file_atomic); an unwritable path is an IOError
// naming it.
//
// The path is where a user's typo lands (`--attention-svg runs/x/model.safetensors`), so writing never
// replaces a file tapegrad did not write as an attention map: the path must end in ".svg", and a file
// already there must begin like one (the <svg> root, then kAttentionMapMark). And the size is bounded:
// the picture has layers x heads x T² cells of about 61 bytes each (measured: 724 tokens in 1 layer of 2
// heads, 1 048 352 cells, made 64.0 MB; 2 000 tokens would make 490 MB), so a text longer than
// attention_map_token_limit() is refused with the limit.
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace tapegrad {

/// The element right after the <svg> root's header that marks a file as an attention map of tapegrad's.
inline constexpr const char* kAttentionMapMark = "<desc>tapegrad attention map</desc>";

/// At most this many heatmap cells (layers x heads x T²) in one picture: 64 MB at ~61 bytes a cell, a
/// picture a browser still opens.
inline constexpr int64_t kAttentionMapCells = int64_t{1} << 20;

/// The most tokens a picture of `panels` heatmaps (layers x heads) may have: floor(sqrt(cells / panels)),
/// 512 for 4 panels, 256 for 16.
int64_t attention_map_token_limit(int64_t panels);

/// IOError "path: ..." unless writing an attention map to path is allowed (see above): it ends in ".svg",
/// and nothing is there or a regular file that begins like one of our attention maps. Nothing is written.
void check_attention_map_path(const std::string& path);

/// weights[l]: layer l's attention probabilities (H,T,T) or (1,H,T,T), float32 or float64, with
/// T = tokens.size() (else a ShapeError naming the shapes). Draws one heatmap panel per (layer, head),
/// layers as rows and heads as columns; in a panel, row q / column k is query token q / key token k,
/// coloured from white (0) to dark blue (1), plus a colour bar. Each panel's cells are the only <rect>s
/// of one <g class="cells"> group. Tokens are XML-escaped and long ones truncated in the labels.
/// check_attention_map_path(path) first; more tokens than attention_map_token_limit(panels) is a ValueError
/// naming the limit and the count.
void write_attention_svg(const std::string& path, const std::vector<std::string>& tokens,
                         const std::vector<Tensor>& weights, const std::string& title);

}  // namespace tapegrad
