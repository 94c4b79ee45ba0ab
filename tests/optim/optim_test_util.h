#pragma once
// Small helpers shared by the optimizer tests: a parameter with chosen values, a gradient put in place
// exactly (a leaf's backward with a seed makes the seed its grad), and an elementwise comparison.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "optim/optimizer.h"

namespace tapegrad::optim::test {

/// A leaf parameter that requires grad, holding `values`.
inline Tensor make_param(const std::vector<double>& values, DType dtype) {
  Tensor p = tensor(values, dtype);
  p.requires_grad_();
  return p;
}

/// Replaces p's grad with exactly `values` (zero_grad, then backward from p itself with that seed).
inline void set_grad(const Tensor& p, const std::vector<double>& values) {
  p.zero_grad();
  p.backward(tensor(values, p.shape(), p.dtype()));
}

/// Every element of t equals expected within |a − e| <= tol·max(1, |e|).
inline void check_values(const Tensor& t, const std::vector<double>& expected, double tol) {
  const std::vector<double> got = t.to_vector();
  REQUIRE(got.size() == expected.size());
  for (size_t k = 0; k < got.size(); ++k) {
    INFO("element " << k << ": got " << got[k] << ", expected " << expected[k]);
    CHECK(got[k] == Approx(expected[k]).epsilon(tol).margin(tol));
  }
}

/// The state entry called `name` (fails the test when there is none).
inline Tensor find_entry(const NamedTensors& state, const std::string& name) {
  for (const auto& [entry, t] : state)
    if (entry == name) return t;
  FAIL("no state entry '" << name << "'");
  return {};
}

/// Tolerances: float64 agrees with PyTorch's float64 to rounding; float32 to its own precision.
inline double tolerance(DType dtype) { return dtype == DType::float64 ? 1e-14 : 1e-6; }

}  // namespace tapegrad::optim::test
