// Bad calls get a tapegrad exception whose message names the op and the shapes: never a crash.
#include <catch2/catch.hpp>

#include "autograd/autograd.h"

using namespace tapegrad;
using Catch::Matchers::Contains;

namespace {
Generator gen(1);
Tensor f32(Shape s) { return zeros(s); }
Tensor f64(Shape s) { return zeros(s, DType::float64); }
}  // namespace

TEST_CASE("errors: matmul") {
  CHECK_THROWS_WITH(matmul(f32({2, 3}), f32({4, 5})), "matmul: [2,3] @ [4,5]: inner dims 3 and 4 differ");
  CHECK_THROWS_WITH(matmul(f32({2, 2, 3}), f32({3, 3, 4})), Contains("matmul") && Contains("batch dims [2] and [3]"));
  CHECK_THROWS_AS(matmul(f32({2, 3}), f64({3, 2})), DTypeError);
  CHECK_THROWS_AS(matmul(f32({}), f32({3})), ShapeError);
  CHECK_THROWS_AS(matmul(ids({1, 2}, {1, 2}), ids({1, 2}, {2, 1})), DTypeError);
}

TEST_CASE("errors: elementwise broadcasting and dtypes") {
  CHECK_THROWS_WITH(add(f32({2, 3}), f32({4})), Contains("add") && Contains("[2,3]") && Contains("[4]"));
  CHECK_THROWS_WITH(mul(f32({3}), f64({3})), Contains("mul") && Contains("float32") && Contains("float64"));
  CHECK_THROWS_AS(sub(f32({2}), f32({3})), ShapeError);
  CHECK_THROWS_AS(div(f32({2, 1, 3}), f32({2, 2})), ShapeError);
  CHECK_THROWS_WITH(exp(ids({1}, {1})), Contains("exp") && Contains("int64"));
}

TEST_CASE("errors: shape ops") {
  CHECK_THROWS_WITH(reshape(f32({2, 3}), {4, 2}), Contains("reshape") && Contains("[2,3]") && Contains("[4,2]"));
  CHECK_THROWS_WITH(reshape(f32({2, 3}), {-1, -1}), Contains("more than one -1"));
  CHECK_THROWS_WITH(transpose(f32({2, 3}), 0, 2), Contains("transpose") && Contains("dim 2") && Contains("[2,3]"));
  CHECK_THROWS_WITH(permute(f32({2, 3}), {0, 0}), Contains("permute") && Contains("repeated"));
  CHECK_THROWS_AS(slice(f32({2, 3}), 1, 0, 2, 0), ValueError);
  CHECK_THROWS_WITH(select(f32({2, 3}), 1, 3), Contains("select") && Contains("index 3"));
  CHECK_THROWS_WITH(concat({f32({2, 3}), f32({3, 3})}, 1), Contains("concat") && Contains("[3,3]"));
  CHECK_THROWS_WITH(squeeze(f32({2, 3}), 0), Contains("squeeze") && Contains("is not 1"));
  CHECK_THROWS_WITH(expand(f32({2, 3}), {3, 3}), Contains("expand") && Contains("[2,3]") && Contains("[3,3]"));
  CHECK_THROWS_AS(split(f32({4}), 0, 0), ValueError);
  CHECK_THROWS_AS(tensor({1, 2, 3}, {2, 2}), ShapeError);
  CHECK_THROWS_AS(zeros({2, -1}), ShapeError);
}

TEST_CASE("errors: reductions, indexing and fused ops") {
  CHECK_THROWS_WITH(sum(f32({2, 3}), 2), Contains("sum") && Contains("[2,3]"));
  CHECK_THROWS_AS(max(f32({2, 3}), -3), ShapeError);
  CHECK_THROWS_WITH(embedding(f32({5, 2}), ids({1, 7}, {2})), Contains("embedding") && Contains("7"));
  CHECK_THROWS_AS(embedding(f32({5, 2}), f32({2})), DTypeError);
  CHECK_THROWS_AS(masked_fill(f32({2, 3}), f32({2, 3}), 0), DTypeError);
  CHECK_THROWS_WITH(masked_fill(f32({2, 3}), mask({1, 0}, {2}), 0), Contains("masked_fill") && Contains("[2]"));
  CHECK_THROWS_AS(softmax(f32({2, 3}), 2), ShapeError);
  CHECK_THROWS_AS(softmax(ids({1}, {1})), DTypeError);
  CHECK_THROWS_WITH(cross_entropy(f32({2, 3}), ids({0, 3}, {2})), Contains("cross_entropy") && Contains("3"));
  CHECK_THROWS_AS(cross_entropy(f32({2, 3}), ids({0, 1, 2}, {3})), ShapeError);
  CHECK_THROWS_WITH(layer_norm(f32({2, 4}), f32({5}), f32({5})), Contains("layer_norm") && Contains("[5]"));
  CHECK_THROWS_AS(dropout(f32({2}), 1.0, true, gen), ValueError);
  CHECK_THROWS_AS(dropout(f32({2}), -0.1, true, gen), ValueError);
}

TEST_CASE("errors: tensor access") {
  CHECK_THROWS_WITH(f32({2}).item(), Contains("item") && Contains("[2]"));
  CHECK_THROWS_AS(f32({2, 2}).at({2, 0}), ShapeError);
  CHECK_THROWS_AS(f32({2}).copy_(f32({3})), ShapeError);
  CHECK_THROWS_AS(Tensor().shape(), Error);
  CHECK_THROWS_AS(arange(0, 1, 0), ValueError);
}

TEST_CASE("errors: a name in a message is quoted on one line, its control characters, quotes and non-ASCII bytes escaped") {
  CHECK(in_quotes("relu") == "'relu'");
  CHECK(in_quotes("") == "''");
  CHECK(in_quotes("re\nlu\t") == "'re\\nlu\\t'");
  CHECK(in_quotes(std::string("a\0b\x7f", 4)) == "'a\\x00b\\x7f'");
  CHECK(in_quotes("it's \\") == "'it\\'s \\\\'");
  CHECK(in_quotes("\xc3\xa9") == "'\\xc3\\xa9'");
}
