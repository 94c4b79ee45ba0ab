// The fast kernels of autograd/kernels/ pinned to their plain references: bit for bit where the code
// claims it (exp_shifted is glibc's expf; a row max is exact), within a stated bound where the fast one
// only adds in another order.
#include <catch2/catch.hpp>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/kernels/exp.h"
#include "autograd/kernels/gelu.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/grad_ptr.h"
#include "autograd/kernels/layernorm.h"
#include "autograd/kernels/row_reductions.h"
#include "autograd/kernels/softmax.h"
#include "autograd/random.h"

using namespace tapegrad;

namespace {

constexpr float kInfF = std::numeric_limits<float>::infinity();

/// Row lengths that exercise the four-lane bodies and every tail length.
const std::vector<int64_t> kLengths = {1, 2, 3, 4, 5, 7, 8, 9, 31, 32, 33, 100, 257};

template <class T>
std::vector<T> normal_row(Generator& gen, int64_t n, double scale = 1) {
  std::vector<T> row(static_cast<size_t>(n));
  for (T& v : row) v = static_cast<T>(scale * gen.normal());
  return row;
}

/// Unit roundoff of T: 2^-24 for float, 2^-53 for double.
template <class T>
constexpr double kU = std::numeric_limits<T>::epsilon() / 2;

/// exp_shifted(x, m) against std::exp(x - m), bit for bit (NaN payloads included).
void check_exp_bits(const std::vector<float>& x, float m) {
  std::vector<float> fast(x.size()), reference(x.size());
  exp_shifted(x.data(), m, fast.data(), static_cast<int64_t>(x.size()));
  exp_shifted_reference(x.data(), m, reference.data(), static_cast<int64_t>(x.size()));
  int64_t mismatches = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::bit_cast<uint32_t>(fast[i]) == std::bit_cast<uint32_t>(reference[i])) continue;
    if (++mismatches <= 5)
      UNSCOPED_INFO("x = " << x[i] << " (bits 0x" << std::hex << std::bit_cast<uint32_t>(x[i]) << std::dec
                           << "), m = " << m << ": fast " << fast[i] << ", expf " << reference[i]);
  }
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("kernels: exp_shifted equals glibc's expf bit for bit on a sweep of every float bit pattern") {
  // Every 61st bit pattern (prime, so every lane position and both signs are hit): 70 million inputs,
  // from the smallest subnormals through results that are subnormal (x < -87.3), underflow to 0
  // (x < -103.97), overflow to inf (x > 88.72), to the infinities and NaNs.
  std::vector<float> x;
  x.reserve(1 << 20);
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 61) {
    x.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
    if (x.size() == x.capacity()) {
      check_exp_bits(x, 0.0f);
      x.clear();
    }
  }
  check_exp_bits(x, 0.0f);
}

TEST_CASE("kernels: exp_shifted equals expf at the special values, in every lane, and with a shift") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), tiny = std::numeric_limits<float>::denorm_min();
  const std::vector<float> special = {
      0.0f, -0.0f, kInfF, -kInfF, nan, -nan, std::bit_cast<float>(0x7fc12345u),  // NaN with a payload
      std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), tiny, -tiny,
      std::numeric_limits<float>::min(), 88.0f, -88.0f, 88.72283f, 88.72284f, -87.33655f, -103.97208f,
      -103.97209f, -104.0f, 0x1.62e42ep6f, -0x1.9fe368p6f, 1e-8f, -1e-8f, 0.5f, -0.5f, 1.0f, 1.5f};
  for (size_t lane = 0; lane < 4; ++lane) {  // each value in each of the four lanes, among ordinary ones
    std::vector<float> x;
    for (float v : special)
      for (size_t j = 0; j < 4; ++j) x.push_back(j == lane ? v : 0.25f * static_cast<float>(j));
    check_exp_bits(x, 0.0f);
  }
  Generator gen(1);
  const std::vector<float> scores = normal_row<float>(gen, 1000, 30);
  for (float m : {3.5f, -2.25f, 100.0f, -100.0f, 1e30f}) check_exp_bits(scores, m);
}

TEST_CASE("kernels: exp_shifted_fast is within 2 ulp of exp over float's range, 0 for -inf and underflow") {
  // Every 97th bit pattern of the inputs whose exp is a normal float or overflows, x in [-87.3, 89]: both
  // signs, every lane position. The error in ulps of the correctly rounded exp (computed in double).
  std::vector<float> x;
  for (uint32_t bits = 0; bits < 0x42b20000u; bits += 97) x.push_back(std::bit_cast<float>(bits));  // [0, 89)
  for (uint32_t bits = 0x80000000u; bits < 0xc2aeac4fu; bits += 97) x.push_back(std::bit_cast<float>(bits));  // (-87.34, -0]
  std::vector<float> y(x.size());
  exp_shifted_fast(x.data(), 0.0f, y.data(), static_cast<int64_t>(x.size()));
  double worst_ulps = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double exact = std::exp(static_cast<double>(x[i]));
    if (exact > std::numeric_limits<float>::max()) continue;  // overflow: checked below
    const float rounded = static_cast<float>(exact);
    const double ulp = std::nextafter(rounded, kInfF) - rounded;
    const double ulps = std::abs(y[i] - exact) / ulp;  // a NaN counts as infinite: std::max would drop it
    worst_ulps = std::isnan(ulps) ? std::numeric_limits<double>::infinity() : std::max(worst_ulps, ulps);
  }
  INFO("worst error " << worst_ulps << " ulp over " << x.size() << " inputs");
  CHECK(worst_ulps <= 2.0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> special = {-kInfF, -87.34f, -100.0f, -1e30f, 0.0f, nan, 3.0f};
  for (size_t lane = 0; lane < 16; ++lane) {  // each in every lane of a vector, and in the scalar tail
    std::vector<float> row(33, -1.0f);
    for (size_t v = 0; v < special.size(); ++v) {
      row[lane] = special[v];
      row[32] = special[v];
      std::vector<float> out(row.size());
      exp_shifted_fast(row.data(), 0.0f, out.data(), static_cast<int64_t>(row.size()));
      for (size_t at : {lane, size_t{32}}) {
        if (special[v] != special[v]) CHECK(out[at] != out[at]);       // NaN stays NaN
        else if (std::exp(special[v]) < std::numeric_limits<float>::min()) CHECK(out[at] == 0.0f);  // underflow: 0
        else CHECK(std::abs(out[at] - std::exp(special[v])) <= 2.5e-7f * std::exp(special[v]));
      }
    }
  }
  std::vector<float> shifted{1.0f, 2.0f, 3.0f}, out(3);
  exp_shifted_fast(shifted.data(), 3.0f, out.data(), 3);
  CHECK(out[2] == 1.0f);  // exp(0) is exact
}

namespace {

/// gelu_forward and gelu_backward (assign and add) against their double references on x, with dy = 1 + x/7
/// (so dx is not the slope alone) and, for add, dx starting at 0.25. The bound, relative, where Φ(x) =
/// ½ erfc(-x/√2) comes from a fit good to 1.2e-7 and exp_shifted_fast to 2 ulp:
///   forward : |y - ref| <= 5e-7 (1 + x²) |ref| + atol
///   backward: |dx - ref| <= 5e-7 (1 + x²) |dy| (Φ + |x| φ) + atol   (the terms' size: Φ + xφ cancels at
///                                                                     x ≈ -0.75, where dx passes 0)
/// 5e-7 is about 4 ulp. The factor 1 + x² is Φ's own sensitivity in the negative tail (x Φ'/Φ ≈ x²: the
/// exponent -x²/2 rounds to half an ulp of x²/2 there). atol = 2^-125 (1 + |x|) for y and 2^-125 (1 + |x|) |dy|
/// for dx: exp_shifted_fast flushes exponentials below float's smallest normal (e^-87.3 = 2^-126) to 0, and
/// y and dx carry those times x (from |x| = 13.2 on).
void check_gelu(const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  const size_t len = x.size();
  std::vector<float> y(len), y_ref(len), dy(len), dx(len), dx_ref(len), dx_add(len, 0.25f), dx_add_ref(len, 0.25f);
  for (size_t i = 0; i < len; ++i) dy[i] = 1.0f + x[i] / 7.0f;
  gelu_forward(x.data(), y.data(), n);
  gelu_forward_reference(x.data(), y_ref.data(), n);
  gelu_backward(dy.data(), x.data(), assign_to(dx.data()), n);
  gelu_backward_reference(dy.data(), x.data(), assign_to(dx_ref.data()), n);
  gelu_backward(dy.data(), x.data(), GradPtr<float, GradMode::add>(dx_add.data()), n);
  gelu_backward_reference(dy.data(), x.data(), GradPtr<float, GradMode::add>(dx_add_ref.data()), n);
  constexpr double kRel = 5e-7, kAtol = 0x1p-125;
  int64_t failures = 0;
  double worst_y = 0, worst_dx = 0;  // in units of the bound's relative part
  for (size_t i = 0; i < len; ++i) {
    const double v = x[i], scale = 1 + v * v;
    const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0)), pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    const double terms = std::abs(static_cast<double>(dy[i])) * (cdf + std::abs(v) * pdf);
    const auto fails = [&, v](double got, double want, double size, double& worst, double atol) {
      if (std::isnan(want) || std::isnan(got)) return std::isnan(want) != std::isnan(got);
      if (std::isinf(want) || std::isinf(got)) return got != want;
      const double err = std::abs(got - want);
      if (std::abs(want) > 1e-30) worst = std::max(worst, err / (kRel * scale * size));
      return err > kRel * scale * size + atol;
    };
    const double atol_y = kAtol * (1 + std::abs(v)), atol_dx = atol_y * std::abs(static_cast<double>(dy[i]));
    const bool bad = fails(y[i], y_ref[i], std::abs(static_cast<double>(y_ref[i])), worst_y, atol_y) |
                     fails(dx[i], dx_ref[i], terms, worst_dx, atol_dx) |
                     fails(dx_add[i], dx_add_ref[i], terms + 0.25, worst_dx, atol_dx);
    if (bad && ++failures <= 5)
      UNSCOPED_INFO("x = " << x[i] << ": y " << y[i] << " (reference " << y_ref[i] << "), dx " << dx[i]
                           << " (reference " << dx_ref[i] << "), dx added " << dx_add[i] << " (reference "
                           << dx_add_ref[i] << ")");
  }
  INFO("n = " << n << ", worst error in units of the bound: forward " << worst_y << ", backward " << worst_dx);
  CHECK(failures == 0);
}

}  // namespace

TEST_CASE("kernels: gelu_forward and gelu_backward against the double std::erfc references, x from -10 to 10") {
  std::vector<float> x;
  for (int64_t k = -200000; k <= 200000; ++k) x.push_back(static_cast<float>(k) * 5e-5f);  // step 5e-5
  // Every 4099th bit pattern with |x| < 16: the small magnitudes (down to subnormals) a step misses.
  for (uint32_t bits = 0; bits < 0x41800000u; bits += 4099) {
    x.push_back(std::bit_cast<float>(bits));
    x.push_back(-std::bit_cast<float>(bits));
  }
  check_gelu(x);
}

TEST_CASE("kernels: gelu at the special values in every lane and the tail, and at lengths 0, 1, 7, 1003") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), tiny = std::numeric_limits<float>::denorm_min(),
              big = std::numeric_limits<float>::max();
  const std::vector<float> special = {0.0f, -0.0f, tiny, -tiny, 1e-30f, -1e-30f, 1e-8f, -1e-8f, 13.0f, -13.0f,
                                      -13.2f, -14.0f, -20.0f, 1e19f, -1e19f, 1e20f, -1e20f, big, -big,
                                      kInfF, -kInfF, nan};
  for (size_t lane = 0; lane < 16; ++lane) {
    std::vector<float> row(273, -0.5f);  // a chunk of 256 and a tail of 17
    for (float v : special) {
      row[lane] = row[256 + lane] = v;
      check_gelu(row);
    }
  }
  // y(+inf) = +inf; y(-inf) = -inf · 0 = NaN and dx(±inf) = NaN, as x · ½(1 + erf(x/√2)) gives;
  // y(-0) = -0; far in the negative tail y is -0 (x times a Φ that underflowed).
  std::vector<float> y(special.size());
  gelu_forward(special.data(), y.data(), static_cast<int64_t>(special.size()));
  CHECK(y[special.size() - 3] == kInfF);
  CHECK(std::isnan(y[special.size() - 2]));
  CHECK(std::isnan(y.back()));
  CHECK((y[1] == 0.0f && std::signbit(y[1])));
  CHECK(y[18] == 0.0f);  // -FLT_MAX
  Generator gen(5);
  for (int64_t n : {0, 1, 7, 1003}) check_gelu(normal_row<float>(gen, n, 3));
  // In place (y may be x): the same bits as into another array.
  std::vector<float> x = normal_row<float>(gen, 300, 3), expected(300);
  gelu_forward(x.data(), expected.data(), 300);
  gelu_forward(x.data(), x.data(), 300);
  CHECK(x == expected);
}

TEST_CASE("kernels: four-chain row reductions against one running sum") {
  // max: exact. sum, dot, centred squares: two summation orders of n terms t_i each lie within
  // (n - 1)·u·sum|t_i| of the exact sum (u = 2^-53), so within 2n·u·sum|t_i| of each other.
  Generator gen(2);
  for (int64_t n : kLengths) {
    INFO("n = " << n);
    const std::vector<float> a = normal_row<float>(gen, n, 3), b = normal_row<float>(gen, n);
    CHECK(row_max(a.data(), n, kContiguous) == row_max_reference(a.data(), n));
    double abs_sum = 0, abs_dot = 0, abs_squares = 0;
    for (int64_t i = 0; i < n; ++i) {
      abs_sum += std::abs(a[i]);
      abs_dot += std::abs(static_cast<double>(a[i]) * b[i]);
      abs_squares += (a[i] - 0.5) * (a[i] - 0.5);
    }
    const double bound = 2.0 * static_cast<double>(n) * kU<double>;
    CHECK(std::abs(row_sum(a.data(), n, kContiguous) - row_sum_reference(a.data(), n)) <= bound * abs_sum);
    CHECK(std::abs(row_dot(a.data(), b.data(), n, kContiguous) - row_dot_reference(a.data(), b.data(), n)) <=
          bound * abs_dot);
    CHECK(std::abs(row_centred_squares(a.data(), 0.5, n) - row_centred_squares_reference(a.data(), 0.5, n)) <=
          bound * abs_squares);
    // a strided row reads every other element
    std::vector<float> strided(2 * static_cast<size_t>(n), kInfF);
    for (int64_t i = 0; i < n; ++i) strided[2 * i] = a[i];
    CHECK(row_max(strided.data(), n, int64_t{2}) == row_max_reference(a.data(), n));
    CHECK(row_sum(strided.data(), n, int64_t{2}) == row_sum(a.data(), n, kContiguous));
  }
}

namespace {

/// Rows to test softmax on: normal scores, huge ones, rows with masked (-inf) keys, a fully masked row.
template <class T>
std::vector<std::vector<T>> softmax_rows(Generator& gen) {
  std::vector<std::vector<T>> rows;
  for (int64_t n : kLengths) {
    rows.push_back(normal_row<T>(gen, n, 4));
    rows.push_back(normal_row<T>(gen, n, 1000));
    std::vector<T> masked = normal_row<T>(gen, n, 2);
    for (int64_t i = 1; i < n; i += 3) masked[i] = -std::numeric_limits<T>::infinity();
    rows.push_back(masked);
  }
  rows.push_back(std::vector<T>(37, -std::numeric_limits<T>::infinity()));
  return rows;
}

/// |fast - reference| <= bound for every element, with the worst gap reported.
template <class T>
void check_close(const std::vector<T>& fast, const std::vector<T>& reference, const std::vector<double>& bound) {
  double worst = 0;
  bool ok = true;
  for (size_t i = 0; i < fast.size(); ++i) {
    const bool same = fast[i] == reference[i] || (std::isnan(fast[i]) && std::isnan(reference[i]));
    const double gap = same ? 0 : std::abs(static_cast<double>(fast[i]) - reference[i]);
    ok = ok && (same || gap <= bound[i]);
    worst = std::max(worst, bound[i] > 0 ? gap / bound[i] : gap);
  }
  INFO("worst gap / bound = " << worst);
  CHECK(ok);
}

template <class T>
void check_softmax_kernels() {
  Generator gen(3);
  for (const std::vector<T>& x : softmax_rows<T>(gen)) {
    const int64_t n = static_cast<int64_t>(x.size());
    INFO("n = " << n << ", x[0] = " << x[0]);
    std::vector<T> y(x.size()), y_ref(x.size()), log_y(x.size()), log_y_ref(x.size());
    softmax_row(x.data(), y.data(), n, kContiguous);
    softmax_row_reference(x.data(), y_ref.data(), n);
    log_softmax_row(x.data(), log_y.data(), n, kContiguous);
    log_softmax_row_reference(x.data(), log_y_ref.data(), n);
    // softmax: fast multiplies exp by a rounded 1/s whose s was summed in another order: within
    // (3 + n·u_double/u) units of u·y. log_softmax: both subtract from the same x - m, but the fast one
    // rounds log s to T first (u·|log s|) and then the difference (u·|y|): within 3u·(|x - m| + |log s|).
    std::vector<double> bound(x.size()), log_bound(x.size());
    const T m = row_max_reference(x.data(), n);
    double s = 0;
    for (T v : x) s += m == -std::numeric_limits<T>::infinity() ? 0 : std::exp(static_cast<double>(v - m));
    for (size_t i = 0; i < x.size(); ++i) {
      bound[i] = (3 + static_cast<double>(n) * kU<double> / kU<T>) * kU<T> * std::abs(y_ref[i]);
      log_bound[i] = 3 * kU<T> * (std::abs(static_cast<double>(x[i] - m)) + std::abs(std::log(s)));
    }
    check_close(y, y_ref, bound);
    check_close(log_y, log_y_ref, log_bound);

    // The same rows read with a stride (a softmax over a non-last dim) give the same values as contiguous
    // ones, except that float rows use std::exp there, which the vector exp equals.
    std::vector<T> strided(3 * x.size()), y_strided(3 * x.size());
    for (int64_t i = 0; i < n; ++i) strided[3 * i] = x[i];
    softmax_row(strided.data(), y_strided.data(), n, int64_t{3});
    for (int64_t i = 0; i < n; ++i) CHECK(y_strided[3 * i] == y[i]);

    // backward: the fast <dy, y> adds in another order, so c differs by up to 2n·u·sum|dy ⊙ y|; each
    // dx_i = y_i (dy_i - c) then within that times |y_i|, plus two roundings of T.
    const std::vector<T> dy = normal_row<T>(gen, n);
    std::vector<T> dx(x.size()), dx_ref(x.size()), log_dx(x.size()), log_dx_ref(x.size());
    softmax_row_backward(y.data(), dy.data(), assign_to(dx.data()), n, kContiguous);
    softmax_row_backward_reference(y.data(), dy.data(), dx_ref.data(), n);
    log_softmax_row_backward(log_y.data(), dy.data(), assign_to(log_dx.data()), n, kContiguous);
    log_softmax_row_backward_reference(log_y.data(), dy.data(), log_dx_ref.data(), n);
    double abs_dot = 0, abs_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      abs_dot += std::abs(static_cast<double>(dy[i]) * y[i]);
      abs_sum += std::abs(dy[i]);
    }
    std::vector<double> dx_bound(x.size()), log_dx_bound(x.size());
    for (int64_t i = 0; i < n; ++i) {
      const double c_gap = 2 * static_cast<double>(n) * kU<double> * abs_dot + kU<T> * abs_dot;
      dx_bound[i] = std::abs(y[i]) * c_gap + 4 * kU<T> * std::abs(y[i]) * (std::abs(dy[i]) + abs_dot);
      const double sum_gap = 2 * static_cast<double>(n) * kU<double> * abs_sum + kU<T> * abs_sum;
      const double e = std::exp(static_cast<double>(log_y[i]));
      log_dx_bound[i] = e * sum_gap + 4 * kU<T> * (std::abs(dy[i]) + e * abs_sum);
    }
    check_close(dx, dx_ref, dx_bound);
    check_close(log_dx, log_dx_ref, log_dx_bound);

    // Adding into the assigned gradient doubles it, exactly: v + fl(v) rounds to 2 fl(v) even when the
    // compiler fuses the product into the addition (an FMA), as it may in the adding loop.
    std::vector<T> added = dx;
    softmax_row_backward(y.data(), dy.data(), GradPtr<T, GradMode::add>(added.data()), n, kContiguous);
    for (int64_t i = 0; i < n; ++i) CHECK(added[i] == 2 * dx[i]);
  }
}

}  // namespace

TEST_CASE("kernels: softmax and log_softmax rows, forward and backward, float32, against the references") {
  check_softmax_kernels<float>();
}

TEST_CASE("kernels: softmax and log_softmax rows, forward and backward, float64, against the references") {
  check_softmax_kernels<double>();
}

namespace {

template <class T>
void check_layer_norm_kernels() {
  Generator gen(4);
  for (int64_t C : {1, 3, 8, 33, 256}) {
    for (int64_t rows : {1, 5, 64, 130}) {  // one block, and several with a ragged last one
      INFO("rows = " << rows << ", C = " << C);
      const std::vector<T> x = normal_row<T>(gen, rows * C, 3), dy = normal_row<T>(gen, rows * C);
      const std::vector<T> w = normal_row<T>(gen, C), b = normal_row<T>(gen, C);
      for (bool affine : {true, false}) {
        const T* pw = affine ? w.data() : nullptr;
        const T* pb = affine ? b.data() : nullptr;
        std::vector<T> y(x.size()), y_ref(x.size());
        std::vector<double> mean(rows), rstd(rows), mean_ref(rows), rstd_ref(rows);
        layer_norm_rows(x.data(), pw, pb, y.data(), mean.data(), rstd.data(), rows, C, 1e-5);
        layer_norm_rows_reference(x.data(), pw, pb, y_ref.data(), mean_ref.data(), rstd_ref.data(), rows, C, 1e-5);
        // μ and r: the sums' orders differ, so within a few times C·u_double of each other (relative to
        // the row's scale); y = (x - μ) r w + b then within 4u of |x - μ| r |w| + |b| plus the stats' gap.
        std::vector<double> y_bound(x.size());
        for (int64_t r = 0; r < rows; ++r) {
          const double stats = 4 * static_cast<double>(C + 4) * kU<double>;
          CHECK(std::abs(mean[r] - mean_ref[r]) <= stats * (std::abs(mean_ref[r]) + 3 / rstd_ref[r] + 1));
          CHECK(std::abs(rstd[r] - rstd_ref[r]) <= stats * rstd_ref[r]);
          for (int64_t k = 0; k < C; ++k) {
            const double xh = std::abs((x[r * C + k] - mean_ref[r]) * rstd_ref[r]);
            const double wk = affine ? std::abs(w[k]) : 1, bk = affine ? std::abs(b[k]) : 0;
            y_bound[r * C + k] = 4 * kU<T> * (xh * wk + bk) + stats * (xh + 1) * wk * 4;
          }
        }
        check_close(y, y_ref, y_bound);

        // backward from the reference's statistics: db sums dy in the same order (exact); dw likewise,
        // but the compiler may fuse dy·x̂ into the addition in one loop and not the other (within
        // rows·u·sum|dy ⊙ x̂|); dx differs by the order of mean(g) and mean(g ⊙ x̂).
        std::vector<T> dx(x.size()), dx_ref(x.size());
        std::vector<double> dw(C), db(C), dw_ref(C), db_ref(C);
        layer_norm_rows_backward(x.data(), dy.data(), pw, mean_ref.data(), rstd_ref.data(), rows, C,
                                 assign_to(dx.data()), dw.data(), db.data());
        layer_norm_rows_backward_reference(x.data(), dy.data(), pw, mean_ref.data(), rstd_ref.data(), rows, C,
                                           dx_ref.data(), dw_ref.data(), db_ref.data());
        std::vector<double> dw_bound(C, 0.0);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t k = 0; k < C; ++k)
            dw_bound[k] += 2 * static_cast<double>(rows) * kU<double> *
                           std::abs(dy[r * C + k] * (x[r * C + k] - mean_ref[r]) * rstd_ref[r]);
        check_close(dw, dw_ref, dw_bound);
        CHECK(db == db_ref);
        std::vector<double> dx_bound(x.size());
        for (int64_t r = 0; r < rows; ++r) {
          double abs_g = 0;
          for (int64_t k = 0; k < C; ++k) abs_g += std::abs(dy[r * C + k] * (affine ? w[k] : T(1)));
          const double means_gap = 2 * static_cast<double>(C + 4) * kU<double> * (abs_g / C) * 4;
          for (int64_t k = 0; k < C; ++k) {
            const double xh = std::abs((x[r * C + k] - mean_ref[r]) * rstd_ref[r]);
            const double gk = std::abs(dy[r * C + k] * (affine ? w[k] : T(1)));
            dx_bound[r * C + k] = rstd_ref[r] * (means_gap * (1 + xh) + 4 * kU<T> * (gk + (1 + xh * xh) * abs_g));
          }
        }
        check_close(dx, dx_ref, dx_bound);

        // Without dx (NoGrad), the sums are the same.
        std::vector<double> dw_only(C), db_only(C);
        layer_norm_rows_backward(x.data(), dy.data(), pw, mean_ref.data(), rstd_ref.data(), rows, C, NoGrad<T>{},
                                 dw_only.data(), db_only.data());
        CHECK(dw_only == dw);
        CHECK(db_only == db);
      }
    }
  }
}

}  // namespace

TEST_CASE("kernels: layer_norm rows, forward and backward, float32, against the references") {
  check_layer_norm_kernels<float>();
}

TEST_CASE("kernels: layer_norm rows, forward and backward, float64, against the references") {
  check_layer_norm_kernels<double>();
}

namespace {

/// |t| elementwise, exactly (one of relu(t), relu(-t) is 0), as a new contiguous tensor.
Tensor abs_of(const Tensor& t) {
  NoGradGuard no_grad;
  return relu(t) + relu(-t);
}

}  // namespace

TEST_CASE("kernels: batched_gemm equals the triple-loop reference: views, broadcast batches, flips, beta, threads, depth split") {
  // Each element of c is k products summed by BLAS in float (in some order, maybe fused): within
  // (k + 2)·u·sum_l |a_il b_lj| of the reference's double sum, plus u·|c| for the beta = 1 addition.
  Generator gen(6);
  auto r = [&](Shape s, DType dtype = DType::float32) { return randn(s, gen, dtype); };
  struct Case {
    const char* name;
    Tensor a;
    bool flip_a;
    Tensor b;
    bool flip_b;
    Shape c_shape, batch;
  };
  const std::vector<Case> cases = {
      {"2-D", r({5, 7}), false, r({7, 3}), false, {5, 3}, {}},
      {"transposed a, a block of rows of b", transpose(r({7, 5}), 0, 1), false, slice(r({10, 3}), 0, 2, 9), false,
       {5, 3}, {}},
      {"broadcast batches", r({2, 1, 4, 6}), false, r({3, 6, 5}), false, {2, 3, 4, 5}, {2, 3}},
      {"da of a broadcast a: flipped b, summed slices", r({2, 3, 4, 5}), false, r({3, 6, 5}), true, {2, 1, 4, 6}, {2, 3}},
      {"db of a broadcast b: flipped a, summed slices", r({2, 1, 4, 6}), true, r({2, 3, 4, 5}), false, {3, 6, 5}, {2, 3}},
      {"empty inner dim", r({3, 0}), false, r({0, 4}), false, {3, 4}, {}},
      // large enough that the split across two threads happens (grain_for_flops)
      {"one product split across threads", r({512, 256}), false, r({200, 256}), true, {512, 200}, {}},
      // depth the longest side (a weight gradient over a batch's rows): split along it, the partials added
      {"dW = dYᵀ X, split along the depth", r({2048, 64}), true, r({2048, 48}), false, {64, 48}, {}},
      {"depth split, a transposed view of b", r({40, 1500}), false, transpose(r({1500, 72}), 0, 1), true, {40, 72}, {}},
      {"depth split, float64", r({1024, 96}, DType::float64), true, r({1024, 40}, DType::float64), false, {96, 40}, {}},
      {"products that own their slices, across threads", r({8, 128, 128}), false, r({8, 128, 128}), false,
       {8, 128, 128}, {8}},
      {"float64", r({3, 4, 5}, DType::float64), false, r({5, 2}, DType::float64), false, {3, 4, 2}, {3}},
  };
  const int threads_before = num_threads();
  for (const Case& c : cases) {
    const bool shared = shares_slices(c.c_shape, c.batch);
    for (int threads : {1, 2, 3}) {  // 3: the depth split in three parts
      for (bool accumulate : {false, true}) {
        if (shared && !accumulate) continue;  // summed slices add (beta = 1)
        INFO(c.name << ", " << threads << " threads, beta " << accumulate);
        set_num_threads(threads);
        const Tensor c0 = r(c.c_shape, c.a.dtype());
        Tensor fast = c0.clone(), reference = c0.clone(), scale = zeros(c.c_shape, c.a.dtype());
        batched_gemm(c.a, c.flip_a, c.b, c.flip_b, fast, c.batch, accumulate);
        batched_gemm_reference(c.a, c.flip_a, c.b, c.flip_b, reference, c.batch, accumulate ? 1 : 0);
        batched_gemm_reference(abs_of(c.a), c.flip_a, abs_of(c.b), c.flip_b, scale, c.batch, 0);
        const int64_t k = c.flip_a ? c.a.shape()[c.a.dim() - 2] : c.a.shape().back();
        const double u = c.a.dtype() == DType::float32 ? kU<float> : kU<double>;
        const std::vector<double> f = fast.to_vector(), ref = reference.to_vector(), s = scale.to_vector(),
                                  c_start = c0.to_vector();
        std::vector<double> bound(f.size());
        for (size_t i = 0; i < f.size(); ++i)
          bound[i] = (static_cast<double>(k) + 2) * u * s[i] + (accumulate ? u * std::abs(c_start[i]) : 0) +
                     std::numeric_limits<double>::denorm_min();
        check_close(f, ref, bound);
        Tensor again = c0.clone();  // the split depends on the shapes and the thread count, never on timing
        batched_gemm(c.a, c.flip_a, c.b, c.flip_b, again, c.batch, accumulate);
        CHECK(again.to_vector() == f);
      }
    }
  }
  set_num_threads(threads_before);
}

TEST_CASE("kernels: repeat_row fills every row with the row, for rows shorter and longer than its stamp") {
  for (int64_t n : {1, 3, 1000, 5000}) {
    for (int64_t rows : {1, 2, 7, 300}) {
      std::vector<float> row(static_cast<size_t>(n)), out(static_cast<size_t>(rows * n), -1.0f);
      for (int64_t k = 0; k < n; ++k) row[k] = static_cast<float>(k) + 0.5f;
      repeat_row(row.data(), out.data(), rows, n);
      bool all = true;
      for (int64_t i = 0; i < rows * n; ++i) all = all && out[i] == row[i % n];
      CHECK(all);
    }
  }
}
