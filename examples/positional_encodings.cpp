// Exercise 3 of ../shared/seeds/003 ("the math of attention", §4): positional-encoding analysis.
//   1. pe_heatmap.svg     : the sinusoidal table PE (64 positions x d_model 64), one frequency per pair of
//                           dimensions, on a diverging scale from -1 to 1 (the chapter's §4.2 figure).
//   2. pe_dot_product.svg : <PE(p), PE(q)> against p - q for several p. Each pair (2i, 2i+1) is a point on
//                           the unit circle at angle p·ω_i, so <PE(p), PE(q)> = Σ_i cos((p - q)·ω_i): a
//                           function of p - q only (§4.3), even in p - q, equal to d/2 at 0.
//   3. rope_relative.svg  : RoPE (§4.4) scores <R(m) q, R(n) k> = <q, R(n - m) k> against m - n for several
//                           absolute offsets: the curves coincide.
// Every identity is checked in float64 within 1e-9, and the program exits 1 if one fails, so running it
// is a test. Usage: positional_encodings [output folder, default "."]
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/random.h"
#include "nn/positions.h"
#include "nn/rope.h"
#include "train/io/atomic_file.h"
#include "train/report/svg.h"

using namespace tapegrad;

namespace {

constexpr int64_t kPositions = 64;  // T of the table and of the dot-product study
constexpr int64_t kModel = 64;      // d_model = C; also the RoPE head dim D
constexpr double kTolerance = 1e-9;  // float64 identities: the rounding of 64-term sums is ~1e-14

/// ColorBrewer "RdBu" reversed, a diverging scale: blue at -1, near-white at 0, red at +1, so the sign of
/// an entry reads at a glance and 0 is neutral.
constexpr std::array<svg::Rgb, 11> kRdBu = {{{5, 48, 97},
                                             {33, 102, 172},
                                             {67, 147, 195},
                                             {146, 197, 222},
                                             {209, 229, 240},
                                             {247, 247, 247},
                                             {253, 219, 199},
                                             {244, 165, 130},
                                             {214, 96, 77},
                                             {178, 24, 43},
                                             {103, 0, 31}}};

/// The frequency of pair i, ω_i = 10000^(-2i/d), as in nn/positions.h and nn/rope.h.
double omega(int64_t i, int64_t d) { return std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(d)); }

/// Collects the identity checks; main exits 1 if any failed.
struct Checks {
  bool ok = true;
  /// Records whether `deviation` is within kTolerance, and prints it.
  void expect_small(const std::string& what, double deviation) {
    const bool pass = deviation <= kTolerance;  // NaN fails too
    ok = ok && pass;
    std::cout << "  check: " << what << ": max |difference| = " << std::scientific << std::setprecision(2) << deviation
              << std::defaultfloat << (pass ? "  ok" : "  FAILED (tolerance 1e-9)") << "\n";
  }
};

// ---- pictures ------------------------------------------------------------------------------------------

/// Writes `values` (rows x cols, row-major, in [-1, 1]) as a heatmap: column = position (x), row =
/// dimension (y, 0 at the top as in the chapter's imshow), on kRdBu with a colour bar.
void write_pe_heatmap(const std::string& path, const std::vector<double>& pe, int64_t positions, int64_t dims) {
  constexpr double kCell = 7, kLeft = 70, kTop = 70;
  const double grid_w = kCell * static_cast<double>(positions), grid_h = kCell * static_cast<double>(dims);
  const double width = kLeft + grid_w + 90, height = kTop + grid_h + 60;
  std::string out = svg::header(width, height);
  svg::text(out, width / 2, 28, "Sinusoidal positional encoding PE(pos, j)",
            "font-size=\"18\" font-weight=\"bold\" text-anchor=\"middle\" fill=\"#111111\"");
  svg::text(out, width / 2, 48, "j = 2i: sin(pos \u00b7 \u03c9_i),  j = 2i+1: cos(pos \u00b7 \u03c9_i),  \u03c9_i = 10000^(-2i/" +
                                    std::to_string(dims) + ")",
            "font-size=\"12\" text-anchor=\"middle\" fill=\"#666666\"");
  // Cell (pos, j) at column pos, row j; the table is (positions, dims), so the picture is its transpose.
  out += "<g class=\"cells\" transform=\"translate(" + svg::num(kLeft) + "," + svg::num(kTop) +
         ")\" shape-rendering=\"crispEdges\">\n";
  for (int64_t j = 0; j < dims; ++j)
    for (int64_t pos = 0; pos < positions; ++pos)
      out += "<rect x=\"" + svg::num(static_cast<double>(pos) * kCell) + "\" y=\"" +
             svg::num(static_cast<double>(j) * kCell) + "\" width=\"" + svg::num(kCell) + "\" height=\"" +
             svg::num(kCell) + "\" fill=\"" + svg::colour_at(kRdBu, (pe[pos * dims + j] + 1) / 2) + "\"/>\n";
  out += "</g>\n<rect x=\"" + svg::num(kLeft) + "\" y=\"" + svg::num(kTop) + "\" width=\"" + svg::num(grid_w) +
         "\" height=\"" + svg::num(grid_h) + "\" fill=\"none\" stroke=\"#999999\"/>\n";
  const std::string tick_attrs = "font-size=\"10\" fill=\"#333333\"";
  for (int64_t v = 0; v < std::max(positions, dims); v += 8) {
    const double c = (static_cast<double>(v) + 0.5) * kCell;
    if (v < positions) {
      svg::line(out, kLeft + c, kTop + grid_h, kLeft + c, kTop + grid_h + 4, "stroke=\"#666666\"");
      svg::text(out, kLeft + c, kTop + grid_h + 16, std::to_string(v), tick_attrs + " text-anchor=\"middle\"");
    }
    if (v < dims) {
      svg::line(out, kLeft - 4, kTop + c, kLeft, kTop + c, "stroke=\"#666666\"");
      svg::text(out, kLeft - 7, kTop + c + 4, std::to_string(v), tick_attrs + " text-anchor=\"end\"");
    }
  }
  svg::text(out, kLeft + grid_w / 2, kTop + grid_h + 36, "position pos", "font-size=\"13\" text-anchor=\"middle\"");
  out += "<text transform=\"translate(" + svg::num(kLeft - 40) + "," + svg::num(kTop + grid_h / 2) +
         ") rotate(-90)\" font-size=\"13\" text-anchor=\"middle\">dimension j</text>\n";
  constexpr std::array<double, 5> ticks = {-1, -0.5, 0, 0.5, 1};
  svg::colour_bar(out, kLeft + grid_w + 20, kTop + 10, grid_h - 10, kRdBu, "rdbu", "PE", -1, 1, ticks);
  out += "</svg>\n";
  write_file_atomic(path, out);
}

/// One curve of a line plot; `dash` is an SVG stroke-dasharray ("" for solid).
struct Series {
  std::string name, colour, dash;
  double stroke_width = 2;
  std::vector<double> x, y;
};

/// A line plot of `series` on shared nice axes, with a legend under the title; a dashed line marks y = 0.
void write_line_plot(const std::string& path, const std::string& title, const std::string& subtitle,
                     const std::string& x_label, const std::string& y_label, const std::vector<Series>& series) {
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const Series& s : series) {
    for (double v : s.x) x_lo = std::min(x_lo, v), x_hi = std::max(x_hi, v);
    for (double v : s.y) y_lo = std::min(y_lo, v), y_hi = std::max(y_hi, v);
  }
  const svg::NiceAxis xa = svg::nice_axis(x_lo, x_hi, 8, 1), ya = svg::nice_axis(y_lo, y_hi, 6);
  const double width = 760, legend_h = 18.0 * static_cast<double>(series.size());
  const svg::Box box{80, 70 + legend_h, width - 30, 70 + legend_h + 340};
  const double height = box.bottom + 56;
  const svg::Scale sx{xa.lo, xa.hi, box.left, box.right}, sy{ya.lo, ya.hi, box.bottom, box.top};

  std::string out = svg::header(width, height);
  svg::text(out, width / 2, 28, title, "font-size=\"18\" font-weight=\"bold\" text-anchor=\"middle\" fill=\"#111111\"");
  svg::text(out, width / 2, 48, subtitle, "font-size=\"12\" text-anchor=\"middle\" fill=\"#666666\"");
  for (double t : xa.ticks()) {
    svg::line(out, sx(t), box.top, sx(t), box.bottom, "stroke=\"#eeeeee\"");
    svg::text(out, sx(t), box.bottom + 16, svg::tick_label(t, xa), "font-size=\"10\" text-anchor=\"middle\" fill=\"#333333\"");
  }
  for (double t : ya.ticks()) {
    svg::line(out, box.left, sy(t), box.right, sy(t), "stroke=\"#eeeeee\"");
    svg::text(out, box.left - 6, sy(t) + 4, svg::tick_label(t, ya), "font-size=\"10\" text-anchor=\"end\" fill=\"#333333\"");
  }
  if (ya.lo < 0 && ya.hi > 0) svg::line(out, box.left, sy(0), box.right, sy(0), "stroke=\"#999999\" stroke-dasharray=\"3,3\"");
  out += "<rect x=\"" + svg::num(box.left) + "\" y=\"" + svg::num(box.top) + "\" width=\"" +
         svg::num(box.right - box.left) + "\" height=\"" + svg::num(box.bottom - box.top) +
         "\" fill=\"none\" stroke=\"#999999\"/>\n";
  svg::text(out, (box.left + box.right) / 2, box.bottom + 38, x_label, "font-size=\"13\" text-anchor=\"middle\"");
  out += "<text transform=\"translate(24," + svg::num((box.top + box.bottom) / 2) +
         ") rotate(-90)\" font-size=\"13\" text-anchor=\"middle\">" + svg::xml_escape(y_label) + "</text>\n";

  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    const std::string stroke = "stroke=\"" + s.colour + "\" stroke-width=\"" + svg::num(s.stroke_width) + "\"" +
                               (s.dash.empty() ? "" : " stroke-dasharray=\"" + s.dash + "\"");
    out += "<polyline fill=\"none\" " + stroke + " points=\"";
    for (size_t k = 0; k < s.x.size(); ++k) out += svg::num(sx(s.x[k])) + "," + svg::num(sy(s.y[k])) + " ";
    out += "\"/>\n";
    const double ly = 64 + 18.0 * static_cast<double>(i);
    svg::line(out, box.left + 10, ly, box.left + 50, ly, stroke);
    svg::text(out, box.left + 58, ly + 4, s.name, "font-size=\"12\" fill=\"#222222\"");
  }
  out += "</svg>\n";
  write_file_atomic(path, out);
}

/// Solid, dashed, dotted: curves that coincide stay distinguishable when drawn over each other.
Series styled(size_t i, std::string name) {
  constexpr std::array<const char*, 3> colours = {"#1f77b4", "#d62728", "#2ca02c"};
  constexpr std::array<const char*, 3> dashes = {"", "9,5", "2,4"};
  constexpr std::array<double, 3> widths = {5, 2.5, 2};
  return {std::move(name), colours[i % 3], dashes[i % 3], widths[i % 3], {}, {}};
}

// ---- the exercise --------------------------------------------------------------------------------------

/// Part 1: the table, and how the frequencies differ across dimensions (exercise 3.1).
std::vector<double> sinusoidal_table(const std::string& path) {
  const nn::SinusoidalPositionalEncoding encoding(kPositions, kModel);
  const std::vector<double> pe = encoding.forward(kPositions, DType::float64).to_vector();  // (T, C)
  std::cout << "== 1. sinusoidal PE, T = " << kPositions << ", d_model = " << kModel << " ==\n"
            << "pair i (dims 2i, 2i+1): frequency w_i = 10000^(-2i/d), wavelength 2*pi/w_i in positions\n"
            << "     i        w_i   wavelength\n";
  for (int64_t i : {0, 1, 2, 4, 8, 12, 16, 20, 24, 28, 31})
    std::cout << std::setw(6) << i << std::setw(11) << std::setprecision(4) << omega(i, kModel) << std::setw(13)
              << std::setprecision(6) << 2 * std::numbers::pi / omega(i, kModel) << "\n";
  std::cout << "(the first pairs complete a turn every few positions, the last ones barely move over 64)\n";
  write_pe_heatmap(path, pe, kPositions, kModel);
  return pe;
}

/// Part 2: <PE(p), PE(q)> depends only on p - q (exercise 3.2).
void dot_products(const std::vector<double>& pe_values, const std::string& path, Checks& checks) {
  const Tensor pe = tensor(pe_values, {kPositions, kModel}, DType::float64);
  const std::vector<double> gram = matmul(pe, transpose(pe, 0, 1)).to_vector();  // (T, T): G[p][q] = <PE(p), PE(q)>
  const auto G = [&](int64_t p, int64_t q) { return gram[p * kPositions + q]; };
  const auto closed_form = [](int64_t diff) {
    double s = 0;
    for (int64_t i = 0; i < kModel / 2; ++i) s += std::cos(static_cast<double>(diff) * omega(i, kModel));
    return s;
  };

  // Translation invariance: <PE(p), PE(p + k)> equals <PE(0), PE(k)> for every p; and both equal the
  // closed form, which checks the table itself and not only a property it shares with other tables.
  double shift = 0, formula = 0;
  for (int64_t k = 0; k < kPositions; ++k)
    for (int64_t p = 0; p + k < kPositions; ++p) {
      shift = std::max(shift, std::fabs(G(p, p + k) - G(0, k)));
      formula = std::max(formula, std::fabs(G(p, p + k) - closed_form(k)));
    }
  std::cout << "\n== 2. <PE(p), PE(q)> against p - q ==\n"
            << "  diff  <PE(32),PE(32-diff)>  mean over p of <PE(p),PE(p+diff)>  sum_i cos(diff*w_i)\n";
  for (int64_t diff : {0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 63}) {
    double mean = 0;
    for (int64_t p = 0; p + diff < kPositions; ++p) mean += G(p, p + diff);
    mean /= static_cast<double>(kPositions - diff);
    std::cout << std::fixed << std::setprecision(6) << std::setw(6) << diff << std::setw(22)
              << (32 - diff >= 0 ? G(32, 32 - diff) : G(0, diff)) << std::setw(36) << mean << std::setw(21)
              << closed_form(diff) << "\n"
              << std::defaultfloat;
  }
  std::cout << "(row diff = 32 and beyond: q = 32 - diff < 0, so the first column shows <PE(0), PE(diff)>)\n";
  checks.expect_small("<PE(p), PE(p+k)> == <PE(0), PE(k)> for all p, k", shift);
  checks.expect_small("<PE(p), PE(p+k)> == sum_i cos(k w_i) for all p, k", formula);

  std::vector<Series> series;
  for (int64_t p : {8, 32, 56}) {
    Series s = styled(series.size(), "p = " + std::to_string(p) + ",  q = 0.." + std::to_string(kPositions - 1));
    for (int64_t q = 0; q < kPositions; ++q) {
      s.x.push_back(static_cast<double>(p - q));
      s.y.push_back(G(p, q));
    }
    series.push_back(std::move(s));
  }
  write_line_plot(path, "<PE(p), PE(q)> depends only on p - q",
                  "d_model = 64: the curves for three p coincide, peak d/2 = 32 at p = q, decay and oscillate",
                  "p - q", "<PE(p), PE(q)>", series);
}

/// Part 3: RoPE scores depend only on m - n (exercise 3.3), and the additive table does not do that.
void rope_relative(const std::string& path, Checks& checks) {
  constexpr int64_t kMaxDiff = 31;
  constexpr std::array<int64_t, 3> offsets = {0, 10, 40};
  constexpr int64_t P = 40 + kMaxDiff + 1;  // positions 0..71 cover every (m, n) below
  Generator gen(3);
  const std::vector<double> q = randn({kModel}, gen, DType::float64).to_vector();
  const std::vector<double> k = randn({kModel}, gen, DType::float64).to_vector();

  // The same q at every position m and the same k at every n; rotary_embedding rotates row m by m·θ_i,
  // so row m of Qr is R(m) q and S[m][n] = <R(m) q, R(n) k>.
  std::vector<double> q_rows, k_rows;
  for (int64_t m = 0; m < P; ++m) {
    q_rows.insert(q_rows.end(), q.begin(), q.end());
    k_rows.insert(k_rows.end(), k.begin(), k.end());
  }
  const Tensor Qr = nn::rotary_embedding(tensor(q_rows, {P, kModel}, DType::float64));
  const Tensor Kr = nn::rotary_embedding(tensor(k_rows, {P, kModel}, DType::float64));
  const std::vector<double> S = matmul(Qr, transpose(Kr, 0, 1)).to_vector();  // (P, P)

  // The additive alternative (§4.2): <q + PE(m), k + PE(n)> carries the cross terms <q, PE(n)> and
  // <PE(m), k>, which depend on the absolute positions.
  const std::vector<double> pe = nn::SinusoidalPositionalEncoding(P, kModel).forward(P, DType::float64).to_vector();
  const auto additive = [&](int64_t m, int64_t n) {
    double s = 0;
    for (int64_t c = 0; c < kModel; ++c) s += (q[c] + pe[m * kModel + c]) * (k[c] + pe[n * kModel + c]);
    return s;
  };
  // <q, R(φ) k> per pair is (q0 k0 + q1 k1) cos φ + (q1 k0 - q0 k1) sin φ, with φ = (n - m) θ_i = -diff·θ_i:
  // the chapter's rotation written out, independent of the library's.
  const auto closed_form = [&](int64_t diff) {
    double s = 0;
    for (int64_t i = 0; i < kModel / 2; ++i) {
      const double phi = -static_cast<double>(diff) * omega(i, kModel);
      const double q0 = q[2 * i], q1 = q[2 * i + 1], k0 = k[2 * i], k1 = k[2 * i + 1];
      s += (q0 * k0 + q1 * k1) * std::cos(phi) + (q1 * k0 - q0 * k1) * std::sin(phi);
    }
    return s;
  };
  // (m, n) with m - n = diff whose earlier position is s.
  const auto pair = [](int64_t s, int64_t diff) { return std::pair{s + std::max<int64_t>(diff, 0), s + std::max<int64_t>(-diff, 0)}; };

  double across = 0, formula = 0, all_pairs = 0, additive_spread = 0;
  for (int64_t diff = -kMaxDiff; diff <= kMaxDiff; ++diff) {
    const auto [m0, n0] = pair(0, diff);
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t s : offsets) {
      const auto [m, n] = pair(s, diff);
      across = std::max(across, std::fabs(S[m * P + n] - S[m0 * P + n0]));
      formula = std::max(formula, std::fabs(S[m * P + n] - closed_form(diff)));
      lo = std::min(lo, additive(m, n)), hi = std::max(hi, additive(m, n));
    }
    additive_spread = std::max(additive_spread, hi - lo);
  }
  for (int64_t m = 0; m < P; ++m)
    for (int64_t n = 0; n < P; ++n) all_pairs = std::max(all_pairs, std::fabs(S[m * P + n] - closed_form(m - n)));

  std::cout << "\n== 3. RoPE: <R(m) q, R(n) k> against m - n, q and k ~ N(0, I_64) (seed 3) ==\n"
            << "(m, n) with m - n = diff and min(m, n) = s; <q, k> without rotation = " << std::setprecision(6)
            << closed_form(0) << "\n"
            << "  diff        s = 0       s = 10       s = 40   closed form  | additive q+PE(m), k+PE(n): s=0, 10, 40\n";
  for (int64_t diff : {-31, -16, -8, -4, -2, -1, 0, 1, 2, 4, 8, 16, 31}) {
    std::cout << std::fixed << std::setprecision(6) << std::setw(6) << diff;
    for (int64_t s : offsets) {
      const auto [m, n] = pair(s, diff);
      std::cout << std::setw(13) << S[m * P + n];
    }
    std::cout << std::setw(13) << closed_form(diff) << "  |";
    for (int64_t s : offsets) {
      const auto [m, n] = pair(s, diff);
      std::cout << std::setw(11) << additive(m, n);
    }
    std::cout << "\n" << std::defaultfloat;
  }
  checks.expect_small("RoPE score equal across offsets s = 0, 10, 40 for every diff in [-31, 31]", across);
  checks.expect_small("RoPE score == sum over pairs of the rotated product (closed form)", formula);
  checks.expect_small("RoPE S[m][n] == closed_form(m - n) over all 72 x 72 (m, n)", all_pairs);
  std::cout << "  quantified (exercise 3.3): largest spread of the score across the three offsets, over diff in "
               "[-31, 31]:\n    RoPE "
            << std::scientific << std::setprecision(2) << across << "   additive sinusoidal PE " << std::defaultfloat
            << std::setprecision(4) << additive_spread << "  (same q, k)\n";

  std::vector<Series> series;
  for (int64_t s : offsets) {
    Series c = styled(series.size(), "min(m, n) = " + std::to_string(s));
    for (int64_t diff = -kMaxDiff; diff <= kMaxDiff; ++diff) {
      const auto [m, n] = pair(s, diff);
      c.x.push_back(static_cast<double>(diff));
      c.y.push_back(S[m * P + n]);
    }
    series.push_back(std::move(c));
  }
  write_line_plot(path, "RoPE: <R(m) q, R(n) k> depends only on m - n",
                  "random q, k in R^64 (seed 3), nn::rotary_embedding: three absolute offsets, one curve",
                  "m - n", "score <R(m) q, R(n) k>", series);
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path folder = argc > 1 ? argv[1] : ".";
  std::filesystem::create_directories(folder);
  const std::string heatmap = (folder / "pe_heatmap.svg").string();
  const std::string dots = (folder / "pe_dot_product.svg").string();
  const std::string rope = (folder / "rope_relative.svg").string();

  Checks checks;
  const std::vector<double> pe = sinusoidal_table(heatmap);
  dot_products(pe, dots, checks);
  rope_relative(rope, checks);

  std::cout << "\nwrote:\n  " << heatmap << "\n  " << dots << "\n  " << rope << "\n";
  if (!checks.ok) {
    std::cerr << "positional_encodings: an identity check failed (see above)\n";
    return 1;
  }
  return 0;
}
