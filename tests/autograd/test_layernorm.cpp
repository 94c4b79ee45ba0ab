// layer_norm: against its composition from primitives (values and all three gradients), on a row with a
// large mean and a tiny spread, and its shape errors.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/autograd.h"

using namespace tapegrad;

namespace {

/// (x - mean) / sqrt(mean((x - mean)²) + eps) ⊙ w + b over the last dim, from primitives.
Tensor layer_norm_composed(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  const Tensor centred = x - mean(x, -1, /*keepdim=*/true);
  const Tensor var = mean(pow(centred, 2), -1, /*keepdim=*/true);
  Tensor y = centred / sqrt(var + eps);
  if (w.defined()) y = y * w;
  if (b.defined()) y = y + b;
  return y;
}

struct Grads {
  Tensor y, dx, dw, db;
};

/// Output and gradients of sum(f(x, w, b) ⊙ r) for fresh leaf copies of x, w, b (w, b may be undefined).
template <class F>
Grads run(F f, const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& r) {
  Tensor x = x0.clone().requires_grad_();
  Tensor w = w0.defined() ? w0.clone().requires_grad_() : Tensor();
  Tensor b = b0.defined() ? b0.clone().requires_grad_() : Tensor();
  Grads out;
  out.y = f(x, w, b);
  backward(out.y, r);
  out.y = out.y.detach();
  out.dx = x.grad();
  if (w.defined()) out.dw = w.grad();
  if (b.defined()) out.db = b.grad();
  return out;
}

const auto fused = [](const Tensor& x, const Tensor& w, const Tensor& b) { return layer_norm(x, w, b); };
const auto composed = [](const Tensor& x, const Tensor& w, const Tensor& b) {
  return layer_norm_composed(x, w, b, 1e-5);
};

}  // namespace

TEST_CASE("layer_norm: values and the gradients of x, weight and bias equal its composition from primitives") {
  Generator gen(21);
  for (DType dtype : {DType::float64, DType::float32}) {
    const double tol = dtype == DType::float64 ? 1e-13 : 2e-5;
    const Tensor x = randn({2, 3, 5}, gen, dtype), w = randn({5}, gen, dtype), b = randn({5}, gen, dtype),
                 r = randn({2, 3, 5}, gen, dtype);
    SECTION(std::string("affine, ") + dtype_name(dtype)) {
      const Grads got = run(fused, x, w, b, r), want = run(composed, x, w, b, r);
      CHECK(max_abs_diff(got.y, want.y) < tol);
      CHECK(max_abs_diff(got.dx, want.dx) < tol);
      CHECK(max_abs_diff(got.dw, want.dw) < tol);
      CHECK(max_abs_diff(got.db, want.db) < tol);
    }
    SECTION(std::string("no affine, ") + dtype_name(dtype)) {
      const Grads got = run(fused, x, Tensor(), Tensor(), r), want = run(composed, x, Tensor(), Tensor(), r);
      CHECK(max_abs_diff(got.y, want.y) < tol);
      CHECK(max_abs_diff(got.dx, want.dx) < tol);
    }
  }
}

TEST_CASE("layer_norm: each output row has mean 0 and biased variance 1/(1 + eps/var)") {
  Generator gen(22);
  const Tensor x = randn({4, 16}, gen, DType::float64);
  const Tensor y = layer_norm(x, Tensor(), Tensor(), 0.0);
  for (int64_t row = 0; row < 4; ++row) {
    double m = 0, v = 0;
    for (int64_t k = 0; k < 16; ++k) m += y.at({row, k}) / 16;
    for (int64_t k = 0; k < 16; ++k) v += (y.at({row, k}) - m) * (y.at({row, k}) - m) / 16;
    CHECK(std::fabs(m) < 1e-15);
    CHECK(v == Approx(1).epsilon(1e-14));
  }
}

TEST_CASE("layer_norm: a row with mean 1e4 and std 1e-3 stays accurate in float64 and float32") {
  // x_k = 1e4 + 1e-3 z_k with z standardised. E[x²] - μ² would subtract two numbers near 1e8: in float32
  // (ulp 8 there) nothing of the variance 1e-6 survives. The two-pass variance in double keeps it.
  Generator gen(23);
  const int64_t C = 32;
  std::vector<double> z(C);
  for (double& v : z) v = gen.normal();
  double zm = 0, zs = 0;
  for (double v : z) zm += v / C;
  for (double v : z) zs += (v - zm) * (v - zm) / C;
  std::vector<double> values(C);
  for (int64_t k = 0; k < C; ++k) values[k] = 1e4 + 1e-3 * (z[k] - zm) / std::sqrt(zs);

  for (DType dtype : {DType::float64, DType::float32}) {
    for (double eps : {1e-5, 1e-12}) {
      INFO(dtype_name(dtype) << ", eps " << eps);
      const Tensor x = tensor(values, {1, C}, dtype);
      // Reference from the values x actually holds (float32 rounds them), in long double, two-pass.
      const std::vector<double> held = x.to_vector();
      long double mu = 0, var = 0;
      for (double v : held) mu += v;
      mu /= C;
      for (double v : held) var += (v - mu) * (v - mu);
      var /= C;
      const long double rstd = 1 / std::sqrt(var + eps);
      const Tensor y = layer_norm(x, Tensor(), Tensor(), eps);
      double worst = 0;
      for (int64_t k = 0; k < C; ++k)
        worst = std::max(worst, static_cast<double>(std::fabs(y.at({0, k}) - (held[k] - mu) * rstd)));
      CHECK(worst < (dtype == DType::float64 ? 1e-8 : 1e-6));

      // Gradients (of order rstd, up to 1e3 here): against the float64 composition at the same values.
      Generator rgen(24);
      const Tensor r = randn({1, C}, rgen, dtype);
      const Tensor x64 = x.to(DType::float64);
      const auto fused_eps = [eps](const Tensor& t, const Tensor&, const Tensor&) {
        return layer_norm(t, Tensor(), Tensor(), eps);
      };
      const auto composed_eps = [eps](const Tensor& t, const Tensor&, const Tensor&) {
        return layer_norm_composed(t, Tensor(), Tensor(), eps);
      };
      const Grads got = run(fused_eps, x, Tensor(), Tensor(), r);
      const Grads want = run(composed_eps, x64, Tensor(), Tensor(), r.to(DType::float64));
      double scale = 0;
      for (double v : want.dx.to_vector()) scale = std::max(scale, std::fabs(v));
      REQUIRE(scale > 100);
      CHECK(max_abs_diff(got.dx.to(DType::float64), want.dx) / scale < (dtype == DType::float64 ? 1e-7 : 1e-6));
    }
  }

  // What the test guards against: E[x²] - μ² in float32 on the same row loses the variance entirely
  // (the quantum of numbers near 1e8 is 8; the variance is 1e-6).
  const Tensor x = tensor(values, {1, C}, DType::float32);
  float s = 0, s2 = 0;
  for (int64_t k = 0; k < C; ++k) {
    const float v = x.data<float>()[k];
    s += v;
    s2 += v * v;
  }
  const float naive_var = s2 / C - (s / C) * (s / C);
  CHECK(std::fabs(naive_var - 1e-6f) > 0.5e-6f);
}

TEST_CASE("layer_norm: shape and dtype errors name the op and the shapes") {
  const Tensor x = zeros({2, 4});
  CHECK_THROWS_AS(layer_norm(x, zeros({5}), Tensor()), ShapeError);
  CHECK_THROWS_WITH(layer_norm(x, zeros({5}), Tensor()),
                    "layer_norm: weight [5] does not match the last dim of x [2,4]");
  CHECK_THROWS_WITH(layer_norm(x, zeros({4}), zeros({2, 4})),
                    "layer_norm: bias [2,4] does not match the last dim of x [2,4]");
  CHECK_THROWS_AS(layer_norm(x, zeros({4}, DType::float64), Tensor()), DTypeError);
  CHECK_THROWS_AS(layer_norm(ids({1, 2}, {2}), Tensor(), Tensor()), DTypeError);
  CHECK_THROWS_AS(layer_norm(x, Tensor(), Tensor(), -1.0), ValueError);
  CHECK_NOTHROW(layer_norm(x, zeros({4}), Tensor()));
}
