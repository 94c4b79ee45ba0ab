// Reductions: values against hand-computed numbers (keepdim shapes, negative dims, strided inputs), the
// gradient of max going to the first of tied maxima, empty dims, and bad calls with their messages.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "autograd/autograd.h"

using namespace tapegrad;
using Catch::Contains;

namespace {
const double kInf = std::numeric_limits<double>::infinity();

/// x = [[1, 2, 3], [4, 5, 6]]   (2, 3)
Tensor two_by_three(DType dtype = DType::float64) { return tensor({1, 2, 3, 4, 5, 6}, {2, 3}, dtype); }

/// x's elements, row-major, as doubles.
std::vector<double> values(const Tensor& x) { return x.to_vector(); }
}  // namespace

TEST_CASE("reduce: sum over all elements and over one dim, with keepdim and negative dims") {
  const Tensor x = two_by_three();
  const Tensor all = sum(x);
  CHECK(all.shape() == Shape{});
  CHECK(all.item() == 21);

  CHECK(sum(x, 0).shape() == Shape{3});
  CHECK(values(sum(x, 0)) == std::vector<double>{5, 7, 9});
  CHECK(sum(x, 0, true).shape() == Shape{1, 3});
  CHECK(values(sum(x, 0, true)) == std::vector<double>{5, 7, 9});
  CHECK(sum(x, -1).shape() == Shape{2});
  CHECK(values(sum(x, -1)) == std::vector<double>{6, 15});
  CHECK(sum(x, -1, true).shape() == Shape{2, 1});
  CHECK(values(sum(x, -2)) == std::vector<double>{5, 7, 9});

  // (2,3,4) holding 0..23: sum over the middle dim is out[i,k] = sum_j (12i + 4j + k) = 36i + 12 + 3k.
  const Tensor cube = reshape(arange(0, 24, 1, DType::float64), {2, 3, 4});
  const Tensor middle = sum(cube, 1);
  CHECK(middle.shape() == Shape{2, 4});
  CHECK(values(middle) == std::vector<double>{12, 15, 18, 21, 48, 51, 54, 57});
  CHECK(sum(cube, -2, true).shape() == Shape{2, 1, 4});
  CHECK(values(sum(cube, -2, true)) == values(middle));
}

TEST_CASE("reduce: sum and mean gradients spread dout back over the reduced dim") {
  Tensor x = two_by_three().requires_grad_();
  backward(sum(x, 1), tensor({1, 2}, DType::float64));
  CHECK(values(x.grad()) == std::vector<double>{1, 1, 1, 2, 2, 2});

  x.zero_grad();
  backward(sum(x, 0, true), tensor({1, 2, 3}, {1, 3}, DType::float64));
  CHECK(values(x.grad()) == std::vector<double>{1, 2, 3, 1, 2, 3});

  x.zero_grad();
  backward(mean(x, -1), tensor({3, 6}, DType::float64));  // / 3 per row
  CHECK(values(x.grad()) == std::vector<double>{1, 1, 1, 2, 2, 2});

  x.zero_grad();
  mean(x).backward();
  for (double g : values(x.grad())) CHECK(g == Approx(1.0 / 6));
}

TEST_CASE("reduce: mean over all elements and over one dim") {
  const Tensor x = two_by_three();
  CHECK(mean(x).shape() == Shape{});
  CHECK(mean(x).item() == 3.5);
  CHECK(values(mean(x, 1)) == std::vector<double>{2, 5});
  const Tensor columns = mean(x, -2, true);
  CHECK(columns.shape() == Shape{1, 3});
  CHECK(values(columns) == std::vector<double>{2.5, 3.5, 4.5});
}

TEST_CASE("reduce: transposed, sliced and expanded views are read through their strides") {
  const Tensor x = two_by_three();
  const Tensor t = transpose(x, 0, 1);  // [[1,4],[2,5],[3,6]], not contiguous
  REQUIRE_FALSE(t.is_contiguous());
  CHECK(values(sum(t, 0)) == std::vector<double>{6, 15});
  CHECK(values(sum(t, 1)) == std::vector<double>{5, 7, 9});
  CHECK(values(mean(t, -1, true)) == std::vector<double>{2.5, 3.5, 4.5});
  CHECK(values(max(t, 1)) == std::vector<double>{4, 5, 6});
  CHECK(argmax(t, 0).to_int_vector() == std::vector<int64_t>{2, 2});
  CHECK(mean(t).item() == 3.5);
  CHECK(max(t).item() == 6);

  const Tensor every_other = slice(x, 1, 0, 3, 2);  // [[1,3],[4,6]]
  CHECK(values(sum(every_other, 1)) == std::vector<double>{4, 10});
  CHECK(values(max(every_other, 0)) == std::vector<double>{4, 6});

  const Tensor rows = expand(tensor({1, 2, 3}, DType::float64), {4, 3});  // stride 0 along dim 0
  CHECK(values(sum(rows, 0)) == std::vector<double>{4, 8, 12});
  CHECK(sum(rows).item() == 24);

  // The gradient of a reduction of a view lands in the right places of the original.
  Tensor leaf = two_by_three().requires_grad_();
  backward(sum(transpose(leaf, 0, 1), 1), tensor({1, 2, 3}, DType::float64));
  CHECK(values(leaf.grad()) == std::vector<double>{1, 2, 3, 1, 2, 3});
  leaf.zero_grad();
  max(transpose(leaf, 0, 1)).backward();  // 6 at leaf[1,2]
  CHECK(values(leaf.grad()) == std::vector<double>{0, 0, 0, 0, 0, 1});
}

TEST_CASE("reduce: max and argmax choose the first of tied maxima, and the gradient goes only there") {
  Tensor x = tensor({3, 1, 3, 2, 5, 5}, {2, 3}, DType::float64).requires_grad_();
  CHECK(values(max(x, 1)) == std::vector<double>{3, 5});
  CHECK(argmax(x, 1).to_int_vector() == std::vector<int64_t>{0, 1});
  CHECK(argmax(x, -1, true).shape() == Shape{2, 1});
  CHECK(argmax(x, 1).dtype() == DType::int64);
  CHECK(values(max(x, 0, true)) == std::vector<double>{3, 5, 5});
  CHECK(argmax(x, 0).to_int_vector() == std::vector<int64_t>{0, 1, 1});

  backward(max(x, 1), tensor({10, 20}, DType::float64));
  CHECK(values(x.grad()) == std::vector<double>{10, 0, 0, 0, 20, 0});

  x.zero_grad();
  max(x).backward();  // 5 first occurs at [1,1]
  CHECK(values(x.grad()) == std::vector<double>{0, 0, 0, 0, 1, 0});

  // -inf is an ordinary value: a row of -inf has max -inf at index 0 (no sentinel to get wrong).
  const Tensor minus = tensor({-kInf, -kInf, -kInf, 2}, {2, 2}, DType::float64);
  CHECK(max(minus, 1).at({0}) == -kInf);
  CHECK(argmax(minus, 1).to_int_vector() == std::vector<int64_t>{0, 1});
  CHECK(max(tensor({-kInf, -kInf}, DType::float64)).item() == -kInf);
}

TEST_CASE("reduce: float32 inputs give float32 outputs and gradients") {
  Tensor x = two_by_three(DType::float32).requires_grad_();
  const Tensor s = sum(x, 0);
  CHECK(s.dtype() == DType::float32);
  CHECK(values(s) == std::vector<double>{5, 7, 9});
  CHECK(mean(x).dtype() == DType::float32);
  CHECK(mean(x).item() == 3.5);
  CHECK(max(x, 1).dtype() == DType::float32);
  backward(max(x, 1), tensor({1, 1}, DType::float32));
  CHECK(x.grad().dtype() == DType::float32);
  CHECK(values(x.grad()) == std::vector<double>{0, 0, 1, 0, 0, 1});
}

TEST_CASE("reduce: a sum over an empty dim is 0, mean and max over one have no value") {
  const Tensor empty_rows = zeros({2, 0}, DType::float64);
  CHECK(sum(empty_rows, 1).shape() == Shape{2});
  CHECK(values(sum(empty_rows, 1)) == std::vector<double>{0, 0});
  CHECK(sum(empty_rows).item() == 0);
  CHECK(sum(empty_rows, 0).shape() == Shape{0});
  // Reducing a nonempty dim of a tensor with no elements is fine: there are no lanes.
  CHECK(mean(empty_rows, 0).shape() == Shape{0});
  CHECK(max(empty_rows, 0, true).shape() == Shape{1, 0});

  REQUIRE_THROWS_AS(mean(empty_rows, 1), ShapeError);
  REQUIRE_THROWS_WITH(mean(empty_rows, 1), Contains("mean") && Contains("[2,0]"));
  REQUIRE_THROWS_AS(max(empty_rows, -1), ShapeError);
  REQUIRE_THROWS_WITH(max(empty_rows, -1), Contains("max") && Contains("[2,0]"));
  REQUIRE_THROWS_AS(argmax(empty_rows, 1), ShapeError);
  REQUIRE_THROWS_WITH(argmax(empty_rows, 1), Contains("argmax") && Contains("[2,0]"));
  REQUIRE_THROWS_AS(mean(empty_rows), ShapeError);
  REQUIRE_THROWS_WITH(mean(empty_rows), Contains("mean") && Contains("[2,0]"));
  REQUIRE_THROWS_AS(max(empty_rows), ShapeError);
  REQUIRE_THROWS_WITH(max(empty_rows), Contains("max") && Contains("[2,0]"));
}

TEST_CASE("reduce: bad dims and dtypes are refused with the op and shape named") {
  const Tensor x = two_by_three();
  REQUIRE_THROWS_AS(sum(x, 2), ShapeError);
  REQUIRE_THROWS_WITH(sum(x, 2), Contains("sum") && Contains("dim 2") && Contains("[2,3]"));
  REQUIRE_THROWS_AS(mean(x, -3, true), ShapeError);
  REQUIRE_THROWS_WITH(mean(x, -3, true), Contains("mean") && Contains("dim -3") && Contains("[2,3]"));
  REQUIRE_THROWS_AS(max(x, 5), ShapeError);
  REQUIRE_THROWS_WITH(max(x, 5), Contains("max") && Contains("[2,3]"));

  const Tensor labels = ids({0, 2, 1}, {3});
  REQUIRE_THROWS_AS(argmax(labels, 0), DTypeError);
  REQUIRE_THROWS_WITH(argmax(labels, 0), Contains("argmax") && Contains("[3]") && Contains("int64"));
  const Tensor flags = mask({1, 0}, {2});
  REQUIRE_THROWS_AS(sum(flags), DTypeError);
  REQUIRE_THROWS_WITH(sum(flags), Contains("sum") && Contains("[2]") && Contains("bool"));
}
