// Indexing: embedding (repeated ids accumulate, the padding row gets no gradient, strided ids and weights),
// masked_fill (broadcast masks, -inf), where (three-way broadcasting), and bad calls with their messages.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "autograd/autograd.h"

using namespace tapegrad;
using Catch::Contains;

namespace {
const double kInf = std::numeric_limits<double>::infinity();

/// weight[v] = [3v, 3v+1, 3v+2]   (V=4, C=3)
Tensor table(DType dtype = DType::float64) { return reshape(arange(0, 12, 1, dtype), {4, 3}); }

std::vector<double> values(const Tensor& x) { return x.to_vector(); }
}  // namespace

TEST_CASE("indexing: embedding looks rows up, repeated ids accumulate and the padding row gets no gradient") {
  Tensor weight = table().requires_grad_();
  const Tensor tokens = ids({1, 0, 1, 3}, {2, 2});  // id 1 twice; id 0 is padding; id 2 unused
  const Tensor out = embedding(weight, tokens, 0);
  REQUIRE(out.shape() == Shape{2, 2, 3});
  // The padding row still reads out in the forward pass.
  CHECK(values(out) == std::vector<double>{3, 4, 5, 0, 1, 2, 3, 4, 5, 9, 10, 11});

  // dout[p, c] = 10 p + c for the row-major position p of each id.
  backward(out, tensor({0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}, {2, 2, 3}, DType::float64));
  // row 0: padding, nothing; row 1: positions 0 and 2 add up; row 2: unused; row 3: position 3.
  CHECK(values(weight.grad()) == std::vector<double>{0, 0, 0, 20, 22, 24, 0, 0, 0, 30, 31, 32});

  // Without a padding_idx, row 0 gets its gradient; a second backward adds to .grad.
  backward(embedding(weight, tokens), tensor(std::vector<double>(12, 1), {2, 2, 3}, DType::float64));
  CHECK(values(weight.grad()) == std::vector<double>{1, 1, 1, 22, 24, 26, 0, 0, 0, 31, 32, 33});
}

TEST_CASE("indexing: embedding reads strided ids and a transposed weight") {
  // ids (2,3) [[0,1,2],[3,0,1]] transposed: (3,2) [[0,3],[1,0],[2,1]]
  const Tensor tokens = transpose(ids({0, 1, 2, 3, 0, 1}, {2, 3}), 0, 1);
  REQUIRE_FALSE(tokens.is_contiguous());
  // A (C, V) = (3, 4) matrix transposed into the (V, C) table [[0,4,8],[1,5,9],[2,6,10],[3,7,11]].
  Tensor stored = reshape(arange(0, 12, 1, DType::float64), {3, 4}).requires_grad_();
  const Tensor weight = transpose(stored, 0, 1);
  const Tensor out = embedding(weight, tokens);
  REQUIRE(out.shape() == Shape{3, 2, 3});
  CHECK(values(out) == std::vector<double>{0, 4, 8, 3, 7, 11, 1, 5, 9, 0, 4, 8, 2, 6, 10, 1, 5, 9});

  // Each row used adds ones into its column of `stored`: ids 0 and 1 twice, 2 and 3 once.
  backward(out, ones({3, 2, 3}, DType::float64));
  CHECK(values(stored.grad()) == std::vector<double>{2, 2, 1, 1, 2, 2, 1, 1, 2, 2, 1, 1});
}

TEST_CASE("indexing: embedding of float32 weights and of a single id") {
  const Tensor weight = table(DType::float32);
  const Tensor row = embedding(weight, ids({2}, {}));
  CHECK(row.shape() == Shape{3});
  CHECK(row.dtype() == DType::float32);
  CHECK(values(row) == std::vector<double>{6, 7, 8});
}

TEST_CASE("indexing: masked_fill with -inf and a broadcast mask, masked places get no gradient") {
  Tensor x = tensor({1, 2, 3, 4, 5, 6}, {2, 3}, DType::float64).requires_grad_();
  const Tensor column = mask({0, 1, 0}, {3});  // broadcast over rows
  const Tensor out = masked_fill(x, column, -kInf);
  REQUIRE(out.shape() == Shape{2, 3});
  CHECK(values(out) == std::vector<double>{1, -kInf, 3, 4, -kInf, 6});

  backward(out, tensor({1, 2, 3, 4, 5, 6}, {2, 3}, DType::float64));
  CHECK(values(x.grad()) == std::vector<double>{1, 0, 3, 4, 0, 6});

  // A (2,1) mask fills whole rows, and a masked row of a transposed input lands in the right column.
  CHECK(values(masked_fill(x.detach(), mask({1, 0}, {2, 1}), 0.5)) == std::vector<double>{0.5, 0.5, 0.5, 4, 5, 6});
  const Tensor t = transpose(x.detach(), 0, 1);  // [[1,4],[2,5],[3,6]]
  CHECK(values(masked_fill(t, mask({0, 1}, {2}), -1)) == std::vector<double>{1, -1, 2, -1, 3, -1});
}

TEST_CASE("indexing: where broadcasts condition, a and b, and each gets the gradient of its picks") {
  const Tensor condition = mask({1, 0}, {2, 1});                       // row 0 from a, row 1 from b
  Tensor a = tensor({1, 2, 3}, {3}, DType::float64).requires_grad_();  // broadcast over rows
  Tensor b = tensor({10}, {1, 1}, DType::float64).requires_grad_();    // broadcast everywhere
  const Tensor out = where(condition, a, b);
  REQUIRE(out.shape() == Shape{2, 3});
  CHECK(values(out) == std::vector<double>{1, 2, 3, 10, 10, 10});

  backward(out, tensor({1, 2, 3, 4, 5, 6}, {2, 3}, DType::float64));
  CHECK(values(a.grad()) == std::vector<double>{1, 2, 3});  // row 0 only
  CHECK(b.grad().shape() == Shape{1, 1});
  CHECK(values(b.grad()) == std::vector<double>{15});  // 4 + 5 + 6, summed over its broadcast

  // Condition of higher rank than both values: (2,1,2) x (2) x (1) -> (2,1,2).
  const Tensor picks =
      where(mask({1, 0, 0, 1}, {2, 1, 2}), tensor({1, 2}, DType::float64), tensor({-1}, DType::float64));
  CHECK(picks.shape() == Shape{2, 1, 2});
  CHECK(values(picks) == std::vector<double>{1, -1, -1, 2});
}

TEST_CASE("indexing: bad calls are refused with the op, the shapes and the bad value named") {
  const Tensor weight = table();
  const Tensor x = tensor({1, 2, 3, 4, 5, 6}, {2, 3}, DType::float64);

  const Tensor bad_id = ids({0, 1, 5, 2}, {2, 2});
  REQUIRE_THROWS_AS(embedding(weight, bad_id), ValueError);
  REQUIRE_THROWS_WITH(embedding(weight, bad_id),
                      Contains("embedding") && Contains("id 5") && Contains("position [1,0]") && Contains("V = 4"));
  REQUIRE_THROWS_AS(embedding(weight, ids({-1}, {1})), ValueError);
  REQUIRE_THROWS_WITH(embedding(weight, ids({-1}, {1})), Contains("embedding") && Contains("id -1"));
  const Tensor float_ids = tensor({0, 1}, DType::float32);
  REQUIRE_THROWS_AS(embedding(weight, float_ids), DTypeError);
  REQUIRE_THROWS_WITH(embedding(weight, float_ids), Contains("embedding") && Contains("[2]") && Contains("int64"));
  REQUIRE_THROWS_AS(embedding(tensor({1, 2, 3}, DType::float64), ids({0}, {1})), ShapeError);
  REQUIRE_THROWS_WITH(embedding(tensor({1, 2, 3}, DType::float64), ids({0}, {1})),
                      Contains("embedding") && Contains("[3]") && Contains("2-D"));
  REQUIRE_THROWS_AS(embedding(weight, ids({0}, {1}), 4), ValueError);
  REQUIRE_THROWS_WITH(embedding(weight, ids({0}, {1}), 4), Contains("embedding") && Contains("padding_idx 4"));

  REQUIRE_THROWS_AS(masked_fill(x, tensor({0, 1, 0}, DType::float64), 0), DTypeError);
  REQUIRE_THROWS_WITH(masked_fill(x, tensor({0, 1, 0}, DType::float64), 0),
                      Contains("masked_fill") && Contains("[3]") && Contains("bool"));
  // The mask may not enlarge x: out always has x's shape.
  const Tensor big = mask({1, 0, 1, 0, 1, 0}, {2, 3});
  const Tensor row = tensor({1, 2, 3}, DType::float64);
  REQUIRE_THROWS_AS(masked_fill(row, big, 0), ShapeError);
  REQUIRE_THROWS_WITH(masked_fill(row, big, 0), Contains("masked_fill") && Contains("[2,3]") && Contains("[3]"));
  REQUIRE_THROWS_AS(masked_fill(x, mask({1, 0}, {2}), 0), ShapeError);
  REQUIRE_THROWS_WITH(masked_fill(x, mask({1, 0}, {2}), 0),
                      Contains("masked_fill") && Contains("[2]") && Contains("[2,3]"));

  REQUIRE_THROWS_AS(where(mask({1, 0}, {2}), x, x), ShapeError);
  REQUIRE_THROWS_WITH(where(mask({1, 0}, {2}), x, x), Contains("where") && Contains("[2]") && Contains("[2,3]"));
  REQUIRE_THROWS_AS(where(mask({1, 0, 1}, {3}), x, x.to(DType::float32)), DTypeError);
  REQUIRE_THROWS_WITH(where(mask({1, 0, 1}, {3}), x, x.to(DType::float32)),
                      Contains("where") && Contains("float64") && Contains("float32"));
  REQUIRE_THROWS_AS(where(x, x, x), DTypeError);
  REQUIRE_THROWS_WITH(where(x, x, x), Contains("where") && Contains("condition [2,3]") && Contains("bool"));
}
