// Embedding: lookup values, PyTorch's name, shape and N(0, 1) initialisation, the padding row (zero at
// the start, never a gradient), accumulation over repeated ids, and errors.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/autograd.h"
#include "nn/embedding.h"

using namespace tapegrad;
using namespace tapegrad::nn;

TEST_CASE("nn: Embedding looks up rows by id") {
  Generator gen(0);
  Embedding embed(5, 3, gen);
  {
    NoGradGuard no_grad;
    embed.weight.copy_(tensor({0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32, 40, 41, 42}, {5, 3}));
  }
  const Tensor out = embed.forward(ids({3, 0, 3, 4}, {2, 2}));
  CHECK(out.shape() == Shape{2, 2, 3});
  CHECK(out.to_vector() == std::vector<double>{30, 31, 32, 0, 1, 2, 30, 31, 32, 40, 41, 42});
  // Seed 001, example 2.2: five token ids, 16-dimensional vectors, then a batch dim.
  Embedding tokens(5, 16, gen);
  CHECK(unsqueeze(tokens.forward(ids({0, 1, 2, 3, 4}, {5})), 0).shape() == Shape{1, 5, 16});
}

TEST_CASE("nn: Embedding has PyTorch's parameter and standard normal initialisation") {
  Generator gen(1);
  const Embedding embed(1000, 16, gen);
  const NamedTensors params = embed.named_parameters();
  REQUIRE(params.size() == 1);
  CHECK(params[0].first == "weight");
  CHECK(params[0].second.shape() == Shape{1000, 16});
  const std::vector<double> w = embed.weight.to_vector();
  double sum = 0, sq = 0;
  for (double v : w) sum += v, sq += v * v;
  const double mean = sum / w.size(), sd = std::sqrt(sq / w.size() - mean * mean);
  CHECK(std::fabs(mean) < 0.03);  // 16000 draws: sd of the mean 0.008
  CHECK(sd == Approx(1).epsilon(0.03));
  CHECK(embed.num_embeddings() == 1000);
  CHECK(embed.dim() == 16);
  CHECK(embed.padding_idx() == -1);
}

TEST_CASE("nn: the padding row starts at zero and gets no gradient while repeated ids accumulate") {
  Generator gen(2);
  const Embedding embed(6, 4, gen, /*padding_idx=*/2);
  for (int64_t c = 0; c < 4; ++c) CHECK(embed.weight.at({2, c}) == 0);
  CHECK(embed.weight.at({1, 0}) != 0);

  const Tensor token_ids = ids({2, 5, 5, 1, 2, 5}, {2, 3});
  const Tensor out = embed.forward(token_ids);
  for (int64_t c = 0; c < 4; ++c) CHECK(out.at({0, 0, c}) == 0);  // the padding row reads out as zeros
  out.backward(ones({2, 3, 4}));
  const Tensor dweight = embed.weight.grad();
  for (int64_t c = 0; c < 4; ++c) {
    CHECK(dweight.at({2, c}) == 0);  // used twice, but padding
    CHECK(dweight.at({5, c}) == 3);  // used three times
    CHECK(dweight.at({1, c}) == 1);
    CHECK(dweight.at({0, c}) == 0);  // unused
  }
}

TEST_CASE("nn: Embedding rejects bad sizes and padding indices and ids") {
  Generator gen(3);
  CHECK_THROWS_AS(Embedding(0, 4, gen), ValueError);
  CHECK_THROWS_AS(Embedding(4, 0, gen), ValueError);
  CHECK_THROWS_AS(Embedding(4, 2, gen, 4), ValueError);
  CHECK_THROWS_AS(Embedding(4, 2, gen, -2), ValueError);
  CHECK_NOTHROW(Embedding(4, 2, gen, 3));
  const Embedding embed(4, 2, gen);
  CHECK_THROWS_AS(embed.forward(ids({0, 4}, {2})), ValueError);
  CHECK_THROWS_AS(embed.forward(tensor({0, 1})), DTypeError);
}
