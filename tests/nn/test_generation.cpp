// Generation with a LanguageModel (nn/generation.h, nn/kv_cache.h): the cached logits equal a full forward's at
// every step for every positional component, generation with and without the cache agrees across a window
// restart, sampling follows its options and a seed, and bad options are refused in one line.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/generation.h"
#include "nn/kv_cache.h"
#include "nn/language_model.h"

using namespace tapegrad;
using namespace tapegrad::nn;
using Catch::Matchers::Contains;

namespace {

/// vocab 11, d_model 16, 4 heads, d_ff 32, 2 layers, context 10, float32, no dropout.
LanguageModelOptions small_lm(const std::string& positional, bool norm_first = true) {
  LanguageModelOptions o;
  o.vocab_size = 11;
  o.d_model = 16;
  o.n_heads = 4;
  o.d_ff = 32;
  o.n_layers = 2;
  o.context_length = 10;
  o.dropout = 0;
  o.positional = positional;
  o.norm_first = norm_first;
  return o;
}

LanguageModel make_model(const LanguageModelOptions& options, uint64_t seed = 7) {
  Generator init(seed);
  return LanguageModel(options, init, nullptr);
}

const std::vector<std::string> kPositional = {"learned", "sinusoidal", "rope", "alibi"};

}  // namespace

TEST_CASE("generation: the KV cache gives a full forward's logits at every position, for every positional component") {
  for (const std::string& positional : kPositional)
    for (const bool norm_first : {true, false}) {
      INFO(positional << (norm_first ? " pre-LN" : " post-LN"));
      LanguageModelOptions options = small_lm(positional, norm_first);
      options.settings.set("attention", "temperature", 0.8);  // the cached path scales as attend() does
      const LanguageModel model = make_model(options);
      REQUIRE(model.supports_kv_cache());
      const std::vector<int64_t> sequence = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};  // the whole context
      const Tensor full = model.forward(ids(sequence, {1, 10}));            // (1, 10, 11)
      std::vector<KeyValueCache> caches = model.make_kv_caches();
      // A prompt of 3 positions in one call, then one position per call.
      const Tensor prompt = model.forward_cached(ids({3, 1, 4}, {1, 3}), caches);
      CHECK(max_abs_diff(prompt, slice(full, 1, 0, 3)) < 1e-5);
      for (int64_t t = 3; t < 10; ++t) {
        const Tensor step = model.forward_cached(ids({sequence[t]}, {1, 1}), caches);
        CHECK(max_abs_diff(step, slice(full, 1, t, t + 1)) < 1e-5);
      }
      CHECK(caches.front().length() == 10);
      CHECK_THROWS_WITH(model.forward_cached(ids({1}, {1, 1}), caches),
                        "LanguageModel: positions 10 + 1 exceed context_length 10");
    }
}

TEST_CASE("generation: with and without the cache, the same seed gives the same tokens, past a window restart") {
  for (const std::string& positional : kPositional) {
    INFO(positional);
    LanguageModel model = make_model(small_lm(positional));
    const std::vector<int64_t> prompt = {2, 7, 1};
    // 25 tokens after 3 pass the context of 10 three times.
    for (const SamplingOptions sampling : {SamplingOptions{0.0}, SamplingOptions{1.0, 5, 0.9}}) {
      Generator a(42), b(42);
      const std::vector<GeneratedToken> cached = generate(model, prompt, 25, sampling, a, true);
      const std::vector<GeneratedToken> recomputed = generate(model, prompt, 25, sampling, b, false);
      REQUIRE(cached.size() == 25);
      REQUIRE(recomputed.size() == 25);
      for (size_t i = 0; i < cached.size(); ++i) {
        CHECK(cached[i].id == recomputed[i].id);
        CHECK(cached[i].log_prob == Approx(recomputed[i].log_prob).margin(1e-5));
        CHECK(cached[i].log_prob <= 0);
      }
    }
    CHECK(model.is_training());  // the mode is restored
  }
}

TEST_CASE("generation: the same seed gives the same text, another seed other text, and tokens arrive as made") {
  LanguageModel model = make_model(small_lm("rope"));
  const SamplingOptions sampling{1.5};
  Generator a(1), b(1), c(2);
  std::vector<int64_t> streamed;
  const auto first = generate(model, std::vector<int64_t>{5}, 30, sampling, a, true,
                              [&](const GeneratedToken& t) { streamed.push_back(t.id); });
  const auto again = generate(model, std::vector<int64_t>{5}, 30, sampling, b);
  const auto other = generate(model, std::vector<int64_t>{5}, 30, sampling, c);
  std::vector<int64_t> first_ids, again_ids, other_ids;
  for (const auto& t : first) first_ids.push_back(t.id);
  for (const auto& t : again) again_ids.push_back(t.id);
  for (const auto& t : other) other_ids.push_back(t.id);
  CHECK(first_ids == again_ids);
  CHECK(first_ids == streamed);
  CHECK(first_ids != other_ids);
}

TEST_CASE("generation: sample_token follows temperature, top-k and top-p") {
  // p = (0.5, 0.3, 0.2) at temperature 1.
  const std::vector<double> logits = {std::log(0.5), std::log(0.3), std::log(0.2)};
  Generator rng(3);
  CHECK(sample_token(logits, {0.0}, rng) == 0);                 // greedy
  CHECK(sample_token(std::vector<double>{1, 2, 2}, {0.0}, rng) == 1);  // ties to the smaller id
  const auto frequencies = [&](const SamplingOptions& options) {
    std::map<int64_t, double> count;
    for (int i = 0; i < 20000; ++i) count[sample_token(logits, options, rng)] += 1.0 / 20000;
    return count;
  };
  auto f = frequencies({1.0});
  CHECK(f[0] == Approx(0.5).margin(0.015));
  CHECK(f[1] == Approx(0.3).margin(0.015));
  CHECK(f[2] == Approx(0.2).margin(0.015));
  f = frequencies({1.0, 2});  // top-k 2: 0.5 / 0.8 and 0.3 / 0.8
  CHECK(f[0] == Approx(0.625).margin(0.015));
  CHECK(f[2] == 0);
  f = frequencies({1.0, 0, 0.6});  // top-p 0.6: 0.5 < 0.6, so 0.5 + 0.3 are kept
  CHECK(f[0] == Approx(0.625).margin(0.015));
  CHECK(f[2] == 0);
  f = frequencies({1.0, 0, 0.4});  // the most likely alone reaches 0.4
  CHECK(f[1] + f[2] == 0);
  f = frequencies({0.5});  // p² renormalised: 0.25 / 0.38, 0.09 / 0.38, 0.04 / 0.38
  CHECK(f[0] == Approx(0.25 / 0.38).margin(0.015));
  CHECK(f[2] == Approx(0.04 / 0.38).margin(0.01));
}

TEST_CASE("generation: bad options, prompts and models are refused in one line") {
  LanguageModel model = make_model(small_lm("learned"));
  Generator rng(0);
  const std::vector<int64_t> prompt = {1, 2};
  CHECK_THROWS_WITH(generate(model, prompt, 5, {-0.5}, rng), "temperature = -0.5 must be 0 (greedy) or in [0.001, 1000]");
  CHECK_THROWS_WITH(generate(model, prompt, 5, {1.0, 0, 0.0}, rng), "top_p = 0 must be in (0, 1]: 0 keeps no token");
  CHECK_THROWS_WITH(generate(model, prompt, 5, {1.0, -1}, rng), "top_k = -1 must be >= 0 (0: every token)");
  CHECK_THROWS_WITH(generate(model, std::vector<int64_t>(11, 1), 5, {}, rng),
                    "generate: the prompt's 11 tokens are more than the context length 10");
  CHECK_THROWS_WITH(generate(model, std::vector<int64_t>{}, 5, {}, rng), Contains("the prompt is empty"));
  CHECK_THROWS_WITH(generate(model, std::vector<int64_t>{1, 11}, 5, {}, rng),
                    "generate: prompt token id 11 is outside the vocabulary [0, 11)");
  // Linear attention keeps no KV cache: generation recomputes the window, and the cached forward says why.
  LanguageModelOptions linear = small_lm("learned");
  linear.attention = "linear";
  LanguageModel linear_model = make_model(linear);
  CHECK_FALSE(linear_model.supports_kv_cache());
  CHECK(generate(linear_model, prompt, 12, {0.0}, rng).size() == 12);
  std::vector<KeyValueCache> caches = linear_model.make_kv_caches();
  CHECK_THROWS_WITH(linear_model.forward_cached(ids({1}, {1, 1}), caches), Contains("keeps no KV cache"));
}
