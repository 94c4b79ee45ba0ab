#include "train/report/attention_map.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "autograd/error.h"
#include "train/io/atomic_file.h"
#include "train/io/run_directory.h"
#include "train/report/svg.h"

namespace tapegrad {

namespace {

using svg::line;
using svg::num;
using svg::num_general;
using svg::text;
using svg::text_width;

/// The sequential scale from white (0) to dark blue (1): ColorBrewer "Blues" with a pure white end.
constexpr std::array<svg::Rgb, 9> kBlues = {{{255, 255, 255},
                                             {222, 235, 247},
                                             {198, 219, 239},
                                             {158, 202, 225},
                                             {107, 174, 214},
                                             {66, 146, 198},
                                             {33, 113, 181},
                                             {8, 81, 156},
                                             {8, 48, 107}}};

/// The colour of a weight on kBlues (clamped to [0, 1]); NaN is a light red that no weight can have, so
/// a broken softmax stands out.
std::string weight_colour(double w) { return std::isnan(w) ? "#f4a3a3" : svg::colour_at(kBlues, w); }

/// Checks one layer's weights against the token count and returns its number of heads.
// weights: (H,T,T) or (1,H,T,T)
int64_t attention_heads(const Tensor& weights, size_t layer, int64_t tokens) {
  if (!weights.defined()) throw ValueError(cat("write_attention_svg: weights[", layer, "] is undefined"));
  if (!is_floating(weights.dtype()))
    throw DTypeError(cat("write_attention_svg: weights[", layer, "] is ", dtype_name(weights.dtype()),
                         "; expected float32 or float64"));
  const Shape& s = weights.shape();
  const bool ok =
      (s.rank() == 3 || (s.rank() == 4 && s[0] == 1)) && s[s.rank() - 1] == tokens && s[s.rank() - 2] == tokens;
  if (!ok)
    throw ShapeError(cat("write_attention_svg: weights[", layer, "] has shape ", s, " but there are ", tokens,
                         " tokens; expected (H,", tokens, ",", tokens, ") or (1,H,", tokens, ",", tokens, ")"));
  return s[s.rank() - 3];
}

}  // namespace

int64_t attention_map_token_limit(int64_t panels) {
  if (panels <= 0) return kAttentionMapCells;
  int64_t tokens = static_cast<int64_t>(std::sqrt(static_cast<double>(kAttentionMapCells / panels)));
  while (tokens * tokens * panels > kAttentionMapCells) --tokens;  // sqrt rounded up
  while ((tokens + 1) * (tokens + 1) * panels <= kAttentionMapCells) ++tokens;  // or down too far
  return tokens;
}

void check_attention_map_path(const std::string& path) {
  if (path.size() < 4 || path.compare(path.size() - 4, 4, ".svg") != 0)
    throw IOError(cat(path, ": does not end in .svg (the attention map is an SVG picture)"));
  if (const std::string run = run_holding_checkpoint(path); !run.empty())
    throw IOError(cat(path, ": is inside a checkpoint of the run ", run,
                      ": tapegrad never writes into a checkpoint (choose a path outside .checkpoints)"));
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found) return;
  if (ec) throw IOError(cat(path, ": cannot check what is there: ", ec.message()));
  if (status.type() == std::filesystem::file_type::directory) throw IOError(cat(path, ": is a directory, not a file"));
  if (status.type() != std::filesystem::file_type::regular)
    throw IOError(cat(path, ": is not a regular file; refusing to write an attention map over it"));
  // The header's numbers vary; the root element, then the mark, within the first kilobyte.
  std::ifstream in(path, std::ios::binary);
  std::string head(1024, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  const std::string header = svg::header(1, 1);
  const std::string root = header.substr(0, header.find(' '));  // "<svg"
  if (!head.starts_with(root) || head.find(kAttentionMapMark) == std::string::npos)
    throw IOError(cat(path, ": exists and is not an attention map tapegrad wrote; refusing to overwrite it "
                            "(remove it or choose another path)"));
}

namespace {

/// Where the panels go and how big their parts are.
struct PanelLayout {
  int64_t T = 0;
  double cell = 0, font = 0, label_width = 0, grid = 0, column_width = 0, row_height = 0, left = 0;
  int64_t stride = 1;  // every stride-th token is labelled: more would overlap at this font size
  bool tooltips = false;
};
constexpr double kMargin = 16, kGap = 18, kPanelTitle = 12, kTop = 64;

/// One head's heatmap: its title, the query labels on the left of each row, the key labels under each column
/// reading upwards, the cells.   w: (H, T, T) of the layer, row-major
void draw_panel(std::string& out, const PanelLayout& g, const std::vector<std::string>& tokens,
                const std::vector<std::string>& labels, const std::vector<double>& w, size_t layer, int64_t h) {
  const int64_t T = g.T;
  const double gx = g.left + static_cast<double>(h) * g.column_width + g.label_width;
  const double gy = kTop + static_cast<double>(layer) * g.row_height + 20;
  out += "<g class=\"panel\">\n";
  const std::string panel_title = "layer " + std::to_string(layer) + ", head " + std::to_string(h);
  const double title_x = std::max(gx + g.grid / 2, gx - g.label_width + text_width(panel_title, kPanelTitle) / 2);
  text(out, title_x, gy - 7, panel_title, "font-size=\"12\" font-weight=\"bold\" text-anchor=\"middle\" fill=\"#222222\"");
  const std::string label_attrs = "font-size=\"" + num(g.font) + "\" fill=\"#333333\"";
  for (int64_t i = 0; i < T; i += g.stride) {
    const double c = (static_cast<double>(i) + 0.5) * g.cell;
    text(out, gx - 4, gy + c, labels[i], label_attrs + " text-anchor=\"end\" dy=\"0.35em\"");
    out += "<text transform=\"translate(" + num(gx + c) + "," + num(gy + g.grid + 4) + ") rotate(-90)\" " + label_attrs +
           " text-anchor=\"end\" dy=\"0.35em\">" + svg::xml_escape(labels[i]) + "</text>\n";
  }
  out += "<g class=\"cells\" transform=\"translate(" + num(gx) + "," + num(gy) + ")\" shape-rendering=\"crispEdges\">\n";
  const std::string size = "\" width=\"" + num(g.cell) + "\" height=\"" + num(g.cell) + "\" fill=\"";
  for (int64_t q = 0; q < T; ++q)
    for (int64_t k = 0; k < T; ++k) {
      const double v = w[static_cast<size_t>((h * T + q) * T + k)];
      out += "<rect x=\"" + num(static_cast<double>(k) * g.cell) + "\" y=\"" + num(static_cast<double>(q) * g.cell) + size +
             weight_colour(v) + "\"";
      if (g.tooltips)
        out += "><title>" + svg::xml_escape(svg::truncate_label(tokens[q], 40)) + " \u2192 " +
               svg::xml_escape(svg::truncate_label(tokens[k], 40)) + ": " +
               (std::isfinite(v) ? num(v, 4) : num_general(v, 4)) + "</title></rect>\n";
      else
        out += "/>\n";
    }
  out += "</g>\n";
  out += "<rect x=\"" + num(gx) + "\" y=\"" + num(gy) + "\" width=\"" + num(g.grid) + "\" height=\"" + num(g.grid) +
         "\" fill=\"none\" stroke=\"#999999\"/>\n</g>\n";
}

}  // namespace

void write_attention_svg(const std::string& path, const std::vector<std::string>& tokens,
                         const std::vector<Tensor>& weights, const std::string& title) {
  check_attention_map_path(path);
  PanelLayout g;
  g.T = static_cast<int64_t>(tokens.size());
  const int64_t T = g.T;
  std::vector<int64_t> heads;
  for (size_t l = 0; l < weights.size(); ++l) heads.push_back(attention_heads(weights[l], l, T));
  const int64_t columns = heads.empty() ? 0 : *std::max_element(heads.begin(), heads.end());
  const int64_t panels = std::accumulate(heads.begin(), heads.end(), int64_t{0});
  if (const int64_t limit = attention_map_token_limit(panels); T > limit)
    throw ValueError(cat("write_attention_svg: ", T, " tokens is more than the ", limit, " an attention map of ",
                         panels, " heatmaps draws (", kAttentionMapCells, " cells at most)"));

  // Cell and font sizes: a panel is about 360 px wide, cells 3..24 px; labels that would overlap at
  // this font size are thinned to every `stride`-th token.
  g.cell = std::clamp(std::floor(360.0 / static_cast<double>(std::max<int64_t>(T, 1))), 3.0, 24.0);
  g.font = std::clamp(g.cell - 1, 7.0, 11.0);
  g.stride = static_cast<int64_t>(std::max(1.0, std::ceil((g.font + 1) / g.cell)));
  constexpr size_t kLabelChars = 14;
  std::vector<std::string> labels;
  for (const std::string& t : tokens) {
    labels.push_back(svg::truncate_label(t, kLabelChars));
    g.label_width = std::max(g.label_width, text_width(labels.back(), g.font));
  }
  g.label_width = std::ceil(g.label_width) + 8;

  // Panel geometry: the y labels, then the grid; above it the panel title, below it the rotated x labels.
  g.grid = g.cell * static_cast<double>(T);
  const double panel_title_width = text_width("layer 00, head 00", kPanelTitle);
  g.column_width = g.label_width + std::max(g.grid, panel_title_width) + kGap;
  g.row_height = 20 + g.grid + 4 + g.label_width + kGap;
  const double bar_height = std::clamp(g.grid, 120.0, 300.0);
  const double content_width = static_cast<double>(columns) * g.column_width + 8 + 14 + 40;
  const double width = std::max(content_width, text_width(title, 18)) + 2 * kMargin;
  g.left = (width - content_width) / 2;  // panels centred under a title wider than them
  const double bar_x = g.left + static_cast<double>(columns) * g.column_width + 8;
  const double height =
      std::max(kTop + static_cast<double>(weights.size()) * g.row_height, kTop + 20 + bar_height + 20) + kMargin;
  g.tooltips = T <= 48;  // hover text per cell: cheap for short sequences, bulky for long ones

  std::string out = svg::header(width, height);
  out += cat(kAttentionMapMark, "\n");
  text(out, width / 2, 28, title, "font-size=\"18\" font-weight=\"bold\" text-anchor=\"middle\" fill=\"#111111\"");
  text(out, width / 2, 48, "rows: query tokens (who attends)  \u00b7  columns: key tokens (attended to)",
       "font-size=\"12\" text-anchor=\"middle\" fill=\"#666666\"");
  if (weights.empty())
    text(out, width / 2, kTop + 40, "no attention weights", "font-size=\"13\" text-anchor=\"middle\" fill=\"#999999\"");
  for (size_t l = 0; l < weights.size(); ++l) {
    const std::vector<double> w = weights[l].to_vector();
    for (int64_t h = 0; h < heads[l]; ++h) draw_panel(out, g, tokens, labels, w, l, h);
  }
  if (!weights.empty()) {
    constexpr std::array<double, 5> ticks = {0.0, 0.25, 0.5, 0.75, 1.0};
    svg::colour_bar(out, bar_x, kTop + 20, bar_height, kBlues, "blues", "weight", 0, 1, ticks);
  }
  out += "</svg>\n";
  write_file_atomic(path, out);
}

}  // namespace tapegrad
