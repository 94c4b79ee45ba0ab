#pragma once
// attention.svg: a model's attention probabilities as heatmaps, one per layer and head (a standalone
// SVG, svg.h). Written atomically and durably (write_file_atomic); an unwritable path is an IOError
// naming it.
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace tapegrad {

/// weights[l]: layer l's attention probabilities (H,T,T) or (1,H,T,T), float32 or float64, with
/// T = tokens.size() (else a ShapeError naming the shapes). Draws one heatmap panel per (layer, head),
/// layers as rows and heads as columns; in a panel, row q / column k is query token q / key token k,
/// coloured from white (0) to dark blue (1), plus a colour bar. Each panel's cells are the only <rect>s
/// of one <g class="cells"> group. Tokens are XML-escaped and long ones truncated in the labels.
void write_attention_svg(const std::string& path, const std::vector<std::string>& tokens,
                         const std::vector<Tensor>& weights, const std::string& title);

}  // namespace tapegrad
