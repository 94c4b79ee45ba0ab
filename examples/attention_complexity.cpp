// Exercise 4 of seed 003 (linear attention): how standard softmax attention and linear attention scale
// with the sequence length n. One head, d = 64, batch 1, no gradient. For each n both run on the same q, k, v
// (one projection of the same input by the same weights):
//   softmax: scaled_dot_product_attention, which builds the (n, n) scores and probabilities: O(n² d) time,
//            O(n²) memory
//   linear : linear_attention with φ = elu + 1, which builds φ(Q), φ(K), φ(K)ᵀV (d, d) and the
//            normaliser: O(n d²) time, O(n d + d²) memory
// It prints the median forward time of each, the bytes of the (n, n) float32 matrix softmax materialises
// against the state linear attention keeps, and how far apart the outputs are, ||a - b|| / ||a||: linear
// attention is a different similarity, not an approximation that converges to softmax's. It draws the
// times on log-log axes with n² and n reference lines into an SVG.
//   attention_complexity [out.svg] [--max-n N]      (default attention_complexity.svg, every n)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/attention.h"
#include "nn/linear_attention.h"
#include "train/io/atomic_file.h"
#include "train/report/svg.h"

using namespace tapegrad;

namespace {

constexpr int64_t kD = 64;

struct Row {
  int64_t n;
  double softmax_ms, linear_ms;
  double softmax_bytes, linear_bytes;
  double relative_l2;
};

/// Median wall time of `runs` calls of f, in milliseconds. The first call is a warm-up (not counted): it
/// pays for the allocator's first touch of the pages, which later calls reuse through the storage cache.
template <class F>
double median_ms(int runs, F&& f) {
  f();
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

/// ||a - b|| / ||a|| over all elements.
double relative_l2(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff += (x[i] - y[i]) * (x[i] - y[i]);
    norm += x[i] * x[i];
  }
  return std::sqrt(diff / norm);
}

Row measure(int64_t n, const Tensor& in_proj_weight, const Tensor& in_proj_bias, Generator& gen) {
  const Tensor x = randn({1, n, kD}, gen);
  // (1, n, 3d) -> q, k, v as (B, H, n, d) = (1, 1, n, d), contiguous
  const std::vector<Tensor> qkv = split(linear(x, in_proj_weight, in_proj_bias), kD, -1);
  const Tensor q = reshape(qkv[0].contiguous(), {1, 1, n, kD}), k = reshape(qkv[1].contiguous(), {1, 1, n, kD}),
               v = reshape(qkv[2].contiguous(), {1, 1, n, kD});
  const int runs = n >= 2000 ? 3 : 7;
  Row row{n, 0, 0, 0, 0, 0};
  Tensor a, b;
  row.softmax_ms = median_ms(runs, [&] { a = nn::scaled_dot_product_attention(q, k, v).output; });
  row.linear_ms = median_ms(runs, [&] { b = nn::linear_attention(q, k, v); });
  const double N = static_cast<double>(n), D = static_cast<double>(kD);
  row.softmax_bytes = 4 * N * N;                        // the (n, n) probabilities (the scores are as large)
  row.linear_bytes = 4 * (2 * N * D + D * D + D + N);   // φ(Q), φ(K), φ(K)ᵀV, Σφ(K), the normaliser
  row.relative_l2 = relative_l2(a, b);
  return row;
}

std::string bytes_label(double bytes) {
  char buf[32];
  if (bytes >= 1e6) std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  else std::snprintf(buf, sizeof buf, "%.1f kB", bytes / 1e3);
  return buf;
}

/// Time against n on log-log axes: the two measured series and, dashed, c n² through softmax's last point
/// and c n through linear's, so that a slope can be read off against them.
void write_plot(const std::string& path, const std::vector<Row>& rows) {
  const double width = 640, height = 440;
  const svg::Box box{80, 50, width - 30, height - 60};
  double lo = 1e300, hi = 0;
  for (const Row& r : rows) {
    lo = std::min({lo, r.softmax_ms, r.linear_ms});
    hi = std::max({hi, r.softmax_ms, r.linear_ms});
  }
  const double n0 = static_cast<double>(rows.front().n), n1 = static_cast<double>(rows.back().n);
  // Reference lines: their ends widen the time axis too.
  const double c2 = rows.back().softmax_ms / (n1 * n1), c1 = rows.back().linear_ms / n1;
  lo = std::min({lo, c2 * n0 * n0, c1 * n0});
  hi = std::max({hi, c2 * n1 * n1, c1 * n1});
  const double y_lo = std::floor(std::log10(lo)), y_hi = std::ceil(std::log10(hi));
  const double x_lo = std::floor(std::log10(n0)), x_hi = std::ceil(std::log10(n1));
  const svg::Scale sx{x_lo, x_hi, box.left, box.right}, sy{y_lo, y_hi, box.bottom, box.top};
  auto X = [&](double n) { return sx(std::log10(n)); };
  auto Y = [&](double ms) { return sy(std::log10(ms)); };

  std::string out = svg::header(width, height);
  svg::text(out, width / 2, 28, "attention forward time, one head, d = 64 (log-log)",
            "font-size=\"15\" text-anchor=\"middle\"");
  // Decade grid and labels.
  for (double e = x_lo; e <= x_hi; ++e) {
    svg::line(out, sx(e), box.top, sx(e), box.bottom, "stroke=\"#e0e0e0\"");
    svg::text(out, sx(e), box.bottom + 18, svg::num(std::pow(10.0, e), 0), "font-size=\"11\" text-anchor=\"middle\"");
  }
  for (double e = y_lo; e <= y_hi; ++e) {
    svg::line(out, box.left, sy(e), box.right, sy(e), "stroke=\"#e0e0e0\"");
    svg::text(out, box.left - 6, sy(e) + 4, svg::num(std::pow(10.0, e), static_cast<int>(std::max(0.0, -e))) + " ms",
              "font-size=\"11\" text-anchor=\"end\"");
  }
  svg::line(out, box.left, box.bottom, box.right, box.bottom, "stroke=\"#333333\"");
  svg::line(out, box.left, box.top, box.left, box.bottom, "stroke=\"#333333\"");
  svg::text(out, (box.left + box.right) / 2, height - 20, "sequence length n", "font-size=\"12\" text-anchor=\"middle\"");

  auto series = [&](auto value, const char* colour, const char* dash) {
    for (size_t i = 0; i + 1 < rows.size(); ++i) {
      const double a = static_cast<double>(rows[i].n), b = static_cast<double>(rows[i + 1].n);
      svg::line(out, X(a), Y(value(rows[i], a)), X(b), Y(value(rows[i + 1], b)),
                std::string("stroke=\"") + colour + "\" stroke-width=\"2\"" + dash);
    }
  };
  series([&](const Row&, double n) { return c2 * n * n; }, "#999999", " stroke-dasharray=\"5,4\"");
  series([&](const Row&, double n) { return c1 * n; }, "#bbbbbb", " stroke-dasharray=\"2,3\"");
  series([](const Row& r, double) { return r.softmax_ms; }, "#c0392b", "");
  series([](const Row& r, double) { return r.linear_ms; }, "#2c6fbb", "");
  for (const Row& r : rows) {
    const double n = static_cast<double>(r.n);
    out += "<circle cx=\"" + svg::num(X(n)) + "\" cy=\"" + svg::num(Y(r.softmax_ms)) + "\" r=\"3\" fill=\"#c0392b\"/>\n";
    out += "<circle cx=\"" + svg::num(X(n)) + "\" cy=\"" + svg::num(Y(r.linear_ms)) + "\" r=\"3\" fill=\"#2c6fbb\"/>\n";
  }
  const double lx = box.left + 14, ly = box.top + 14;
  const std::vector<std::pair<const char*, const char*>> legend = {
      {"#c0392b", "softmax (builds n x n)"}, {"#2c6fbb", "linear, phi = elu + 1"},
      {"#999999", "c n^2 (dashed)"}, {"#bbbbbb", "c n (dotted)"}};
  for (size_t i = 0; i < legend.size(); ++i) {
    const double y = ly + 16 * static_cast<double>(i);
    svg::line(out, lx, y, lx + 22, y, std::string("stroke=\"") + legend[i].first + "\" stroke-width=\"2\"");
    svg::text(out, lx + 28, y + 4, legend[i].second, "font-size=\"11\"");
  }
  out += "</svg>\n";
  write_file_atomic(path, out);
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "attention_complexity.svg";
  int64_t max_n = 5000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--max-n" && i + 1 < argc) max_n = std::atoll(argv[++i]);
    else if (!arg.empty() && arg[0] != '-') path = arg;
    else {
      std::fprintf(stderr, "usage: %s [out.svg] [--max-n N]\n", argv[0]);
      return 2;
    }
  }
  NoGradGuard no_grad;
  Generator gen(3);
  // One head of width 64: the weights of a softmax layer, shared by both computations.
  const nn::MultiHeadAttention layer({kD, 1}, gen, nullptr);
  std::vector<Row> rows;
  for (int64_t n : {100, 500, 1000, 2000, 5000}) {
    if (n > max_n) break;
    rows.push_back(measure(n, layer.in_proj_weight, layer.in_proj_bias, gen));
  }
  if (rows.size() < 2) {
    std::fprintf(stderr, "--max-n %lld leaves fewer than two lengths to compare\n", static_cast<long long>(max_n));
    return 2;
  }
  std::printf("%6s  %12s  %12s  %9s  %16s  %14s  %13s\n", "n", "softmax ms", "linear ms", "speed-up",
              "softmax n x n", "linear state", "rel L2 diff");
  for (const Row& r : rows)
    std::printf("%6lld  %12.3f  %12.3f  %8.1fx  %16s  %14s  %13.4f\n", static_cast<long long>(r.n), r.softmax_ms,
                r.linear_ms, r.softmax_ms / r.linear_ms, bytes_label(r.softmax_bytes).c_str(),
                bytes_label(r.linear_bytes).c_str(), r.relative_l2);
  // Growth exponents between the first and last n: 2 for quadratic, 1 for linear asymptotically. Fixed
  // per-call costs (op dispatch, the (d, d) products) weigh more at small n, which pulls a measured
  // exponent below its asymptote; the slope between the two largest n is the closer reading.
  const Row &first = rows.front(), &last = rows.back();
  const double span = std::log(static_cast<double>(last.n) / static_cast<double>(first.n));
  std::printf("time growth exponent n=%lld..%lld: softmax %.2f, linear %.2f\n", static_cast<long long>(first.n),
              static_cast<long long>(last.n), std::log(last.softmax_ms / first.softmax_ms) / span,
              std::log(last.linear_ms / first.linear_ms) / span);
  const Row& before = rows[rows.size() - 2];
  const double top = std::log(static_cast<double>(last.n) / static_cast<double>(before.n));
  std::printf("time growth exponent n=%lld..%lld: softmax %.2f, linear %.2f\n", static_cast<long long>(before.n),
              static_cast<long long>(last.n), std::log(last.softmax_ms / before.softmax_ms) / top,
              std::log(last.linear_ms / before.linear_ms) / top);
  // A non-finite time or difference means a broken computation, not a slow one: fail (the ctest runs this).
  for (const Row& r : rows)
    if (!(std::isfinite(r.relative_l2) && r.softmax_ms > 0 && r.linear_ms > 0)) {
      std::fprintf(stderr, "n = %lld: non-finite or zero result\n", static_cast<long long>(r.n));
      return 1;
    }
  write_plot(path, rows);
  std::printf("plot: %s\n", path.c_str());
  return 0;
}
