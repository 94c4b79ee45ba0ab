// cumsum against its definition, forward and backward (the backward is the running sum from the end).
#include <catch2/catch.hpp>

#include "autograd/autograd.h"
#include "autograd/ops/scan.h"

using namespace tapegrad;

TEST_CASE("cumsum: running sums along the dim, and the gradient sums the cotangent from the end") {
  const Tensor x = tensor({1, 2, 3, 4, 5, 6}, {2, 3}, DType::float64).requires_grad_();
  const Tensor y = cumsum(x, 1);
  CHECK(y.to_vector() == std::vector<double>{1, 3, 6, 4, 9, 15});
  CHECK(cumsum(x, 0).to_vector() == std::vector<double>{1, 2, 3, 5, 7, 9});
  sum(y * tensor({1, 10, 100, 1, 10, 100}, {2, 3}, DType::float64)).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{111, 110, 100, 111, 110, 100});
  CHECK_THROWS_WITH(cumsum(x, 2), Catch::Contains("cumsum"));
}
