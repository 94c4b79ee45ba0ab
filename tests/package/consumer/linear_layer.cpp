// nn::Linear through the installed headers and libraries: forward, backward, and the gradients checked
// against their closed form. y = x Wᵀ + b, loss = sum(y ⊙ r)  =>  dW = rᵀ x, db = Σ_rows r, dx = r W.
#include <cstdio>

#include "autograd/autograd.h"
#include "nn/linear.h"

using namespace tapegrad;

int main() {
  Generator gen(7);
  nn::Linear layer(3, 2, /*bias=*/true, gen);
  const Tensor x = randn({4, 3}, gen).requires_grad_();
  const Tensor r = randn({4, 2}, gen);  // a random cotangent: sum(y) would hide a wrong Jacobian

  const Tensor y = layer.forward(x);
  sum(y * r).backward();

  const Tensor r_t = transpose(r, 0, 1);
  const bool ok = y.shape() == Shape{4, 2} && allclose(layer.weight.grad(), matmul(r_t, x), 1e-5, 1e-6) &&
                  allclose(layer.bias.grad(), sum(r, 0), 1e-5, 1e-6) &&
                  allclose(x.grad(), matmul(r, layer.weight), 1e-5, 1e-6);
  std::printf("Linear(3, 2): y %s, gradients %s\n", y.shape().str().c_str(), ok ? "match" : "DIFFER");
  return ok ? 0 : 1;
}
