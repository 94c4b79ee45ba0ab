// The cross-attention block (nn/cross_attention.h): PyTorch's names, the formula from its parts, queries
// that never see each other, memory padding, and its gradient checks.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/cross_attention.h"

using namespace tapegrad;
using namespace tapegrad::nn;

TEST_CASE("nn: CrossAttentionLayer has PyTorch's names for the cross-attention block") {
  Generator gen(1);
  const CrossAttentionLayer layer({8, 2, 0.0}, gen, nullptr);
  std::vector<std::string> names;
  for (const auto& [name, p] : layer.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias",
                                          "multihead_attn.out_proj.weight", "multihead_attn.out_proj.bias",
                                          "norm.weight", "norm.bias"});
}

TEST_CASE("nn: CrossAttentionLayer is norm(x + attention of x over the memory), or x + attention(norm(x))") {
  Generator data(2);
  const Tensor x = randn({2, 3, 8}, data), memory = randn({2, 5, 8}, data);
  const Tensor pads = mask({0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 5});
  for (const bool norm_first : {false, true}) {
    Generator gen(3);
    const CrossAttentionLayer layer({8, 2, 0.0, norm_first}, gen, nullptr);
    const MultiHeadAttention& mha = layer.multihead_attn();
    const Tensor expected = norm_first ? x + mha.forward(layer.norm().forward(x), memory, memory, {}, pads).output
                                       : layer.norm().forward(x + mha.forward(x, memory, memory, {}, pads).output);
    INFO("norm_first " << norm_first);
    CHECK(max_abs_diff(layer.forward(x, memory, pads), expected) == 0);
    CHECK(layer.forward(x, memory, pads).shape() == Shape{2, 3, 8});
  }
}

TEST_CASE("nn: in CrossAttentionLayer a query sees the memory only, never the other queries or padded memory") {
  Generator gen(4);
  const CrossAttentionLayer layer({8, 2, 0.0}, gen, nullptr);
  Generator data(5);
  const Tensor x = randn({1, 3, 8}, data), memory = randn({1, 4, 8}, data);
  const Tensor pads = mask({0, 0, 0, 1}, {1, 4});
  const Tensor out = layer.forward(x, memory, pads);
  // Another query 2 leaves queries 0 and 1 as they were.
  const Tensor x2 = concat({slice(x, 1, 0, 2), randn({1, 1, 8}, data)}, 1);
  CHECK(max_abs_diff(slice(layer.forward(x2, memory, pads), 1, 0, 2), slice(out, 1, 0, 2)) == 0);
  // Another padded memory position changes nothing; another visible one changes every query.
  const Tensor other_pad = concat({slice(memory, 1, 0, 3), randn({1, 1, 8}, data)}, 1);
  CHECK(max_abs_diff(layer.forward(x, other_pad, pads), out) == 0);
  const Tensor other_visible = concat({randn({1, 1, 8}, data), slice(memory, 1, 1, 4)}, 1);
  CHECK(max_abs_diff(layer.forward(x, other_visible, pads), out) > 1e-4);
  CHECK_THROWS_AS(layer.forward(x, randn({2, 4, 8}, data)), ShapeError);  // batches differ
}

TEST_CASE("nn: the cross-attention gradient checks pass in float64") {
  int found = 0;
  for (const GradcheckCase& c : gradcheck_cases())
    if (c.name.rfind("nn/cross_attention/", 0) == 0) {
      ++found;
      const GradcheckResult result = c.run(GradcheckOptions::float64());
      INFO(c.name << "\n" << result.str());
      CHECK(result.passed);
      CHECK(result.inputs.size() == 2 + 6);  // x, memory and the six parameters
    }
  CHECK(found == 2);
}
