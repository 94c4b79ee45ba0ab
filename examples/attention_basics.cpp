// Attention without trainable weights, step by step, on the six 3-d vectors of
// "Your journey starts with one step" (../shared/seeds/002, section 3.3). Every tensor the notebook
// prints is printed here, computed with tapegrad's ops.
#include <iostream>

#include "autograd/autograd.h"

using namespace tapegrad;

namespace {
void step(const std::string& title) { std::cout << "\n== " << title << " ==\n"; }

/// exp(x) / sum(exp(x)): overflows for large inputs, which is why softmax subtracts the max.
Tensor softmax_naive(const Tensor& x) { return exp(x) / sum(exp(x)); }
}  // namespace

int main() {
  const Tensor inputs = tensor({0.43, 0.15, 0.89,    // Your     (x^1)
                                0.55, 0.87, 0.66,    // journey  (x^2)
                                0.57, 0.85, 0.64,    // starts   (x^3)
                                0.22, 0.58, 0.33,    // with     (x^4)
                                0.77, 0.25, 0.10,    // one      (x^5)
                                0.05, 0.80, 0.55},   // step     (x^6)
                               {6, 3});
  std::cout << "inputs (one row per token):\n" << inputs << "\n";

  step("1. attention scores of the query x^2: dot products with every input");
  const Tensor query = select(inputs, 0, 1);
  std::vector<double> dots;
  for (int64_t i = 0; i < 6; ++i) dots.push_back(sum(select(inputs, 0, i) * query).item());
  const Tensor scores_2 = tensor(dots);
  std::cout << scores_2 << "\n";
  std::cout << "the same as one product, inputs @ query: " << matmul(inputs, query) << "\n";

  step("2. normalise the scores: by their sum, then by softmax");
  const Tensor simple = scores_2 / sum(scores_2);
  std::cout << "Attention weights: " << simple << "\nSum: " << sum(simple) << "\n";
  const Tensor naive = softmax_naive(scores_2);
  std::cout << "Attention weights (naive softmax): " << naive << "\nSum: " << sum(naive) << "\n";
  const Tensor weights_2 = softmax(scores_2, 0);
  std::cout << "Attention weights (stable softmax): " << weights_2 << "\nSum: " << sum(weights_2) << "\n";

  step("3. context vector z^2: the inputs weighted by the attention weights");
  std::cout << matmul(weights_2, inputs) << "\n";

  step("4. all attention scores at once: inputs @ inputs^T");
  const Tensor scores = matmul(inputs, transpose(inputs, 0, 1));
  std::cout << scores << "\n";

  step("5. attention weights: softmax of every row");
  const Tensor weights = softmax(scores, -1);
  std::cout << weights << "\n";
  std::cout << "All row sums: " << sum(weights, -1) << "\n";

  step("6. all context vectors: weights @ inputs");
  const Tensor context = matmul(weights, inputs);
  std::cout << context << "\n";
  std::cout << "Previous 2nd context vector: " << select(context, 0, 1) << "\n";

  step("why softmax subtracts the max: scores of +-1000");
  const Tensor extreme = tensor({1000, -1000, 999});
  std::cout << "naive:  " << softmax_naive(extreme) << "\n";
  std::cout << "stable: " << softmax(extreme, 0) << "\n";

  step("the softmax Jacobian J = diag(p) - p p^T at the weights of x^2 (each row sums to 0)");
  std::cout << softmax_jacobian(weights_2.to(DType::float64)) << "\n";
  return 0;
}
