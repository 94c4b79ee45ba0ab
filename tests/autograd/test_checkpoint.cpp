// Activation checkpointing's kept results: the recomputation takes flash attention's output and
// log-sum-exp from the forward instead of running its kernels again, and the gradients stay the plain
// run's, bit for bit. (The checkpoint's own gradchecks are in the registry: ops/checkpoint.cpp.)
#include <catch2/catch.hpp>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/ops/checkpoint.h"

using namespace tapegrad;

namespace {

/// x.grad of sum(f(x) · weights), f(x) the sum of `calls` flash attentions over the packed projection x
/// (dropout and padding; every other one causal), checkpointed or not; `outputs` gets the data pointer of
/// every flash output the run computed or took, in order.
Tensor gradient(const Tensor& input, int calls, bool checkpointed, std::vector<const void*>& outputs) {
  Tensor x = input.detach();
  x.requires_grad_();
  Generator rng(3);
  const Tensor padding = mask({0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {2, 10});
  const auto f = [&](const Tensor& in) {
    Tensor total;
    for (int c = 0; c < calls; ++c) {
      FlashAttentionOptions options;
      options.causal = c % 2 == 1;
      options.key_padding_mask = padding;
      options.dropout_p = 0.2;
      options.dropout_rng = &rng;
      const Tensor out = flash_self_attention(in, 2, options);
      outputs.push_back(out.data_ptr());
      total = total.defined() ? total + out : out * 1.0;
    }
    return total;
  };
  const Tensor y = checkpointed ? checkpoint(f, x, {}, &rng) : f(x);
  Generator weights_gen(9);
  sum(y * randn(y.shape(), weights_gen, y.dtype())).backward();
  return x.grad();
}

}  // namespace

TEST_CASE("checkpoint: the recomputation takes flash attention's kept output, and the gradients are the plain run's") {
  Generator gen(1);
  const Tensor x = randn({2, 10, 12}, gen, DType::float64);  // 2 heads of 2 in a packed projection
  std::vector<const void*> plain_outputs, outputs;
  const Tensor plain = gradient(x, 1, false, plain_outputs);
  const Tensor checked = gradient(x, 1, true, outputs);
  REQUIRE(outputs.size() == 2);  // the forward, then the recomputation
  CHECK(outputs[1] == outputs[0]);  // the same numbers in the same memory: taken, not computed again
  CHECK(plain.to_vector() == checked.to_vector());
}

TEST_CASE("checkpoint: results past the kept slots are computed again, in order, with the same gradients") {
  Generator gen(2);
  const Tensor x = randn({2, 10, 12}, gen, DType::float64);
  const int calls = KeptResults::kSlots / 2 + 1;  // two results a call: the last call finds no slot
  std::vector<const void*> plain_outputs, outputs;
  const Tensor plain = gradient(x, calls, false, plain_outputs);
  const Tensor checked = gradient(x, calls, true, outputs);
  REQUIRE(outputs.size() == static_cast<size_t>(2 * calls));
  for (int c = 0; c + 1 < calls; ++c) CHECK(outputs[calls + c] == outputs[c]);
  CHECK(outputs[2 * calls - 1] != outputs[calls - 1]);
  CHECK(plain.to_vector() == checked.to_vector());
}
