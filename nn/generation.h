#pragma once
// Text generation with a LanguageModel: the next token drawn from the model's distribution, one at a time,
// with temperature, top-k and top-p (nucleus) sampling, over a KV cache (nn/kv_cache.h) or by recomputing the
// window at every token.
//
// The window. A model sees at most context_length positions. Once the sequence fills them, the window
// restarts at its last context_length / 2 tokens (rounded up; at most context_length - 1, so that a context
// of 1 restarts at the new token alone) and the new one: they are run again in one forward, which
// refills the caches, and generation goes on from there. Every position keeps the position it had in its
// window, so learned and sinusoidal positions stay within the table and RoPE and ALiBi within the lengths
// they were trained on; a restart costs one forward of half a window every half window of tokens. Without the
// cache the same window is recomputed at each token, so both give the same logits (tested).
// Letters: V vocab.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "autograd/error.h"
#include "autograd/random.h"
#include "nn/language_model.h"
#include "nn/settings.h"

namespace tapegrad::nn {

/// The sampling temperatures that are neither greedy nor uniform (generation.cpp says why).
inline constexpr double kMinTemperature = 1e-3, kMaxTemperature = 1e3;

struct SamplingOptions {
  double temperature = 1.0;  // in [kMinTemperature, kMaxTemperature] divides the logits; 0 takes the most likely token (greedy)
  int64_t top_k = 0;         // keep the k most likely tokens; 0: all
  double top_p = 1.0;        // keep the fewest most likely tokens whose probabilities sum to >= top_p; in (0, 1]
  int64_t never = -1;        // a token never drawn (-1: none), e.g. <unk>, which stands for no text at all
};

/// The logits a token is drawn from hold a NaN or an infinity (weights whose forward overflows): `position` is
/// the token's place among the new ones (0: the one after the prompt), `value` the largest logit.
struct NonFiniteLogits : ValueError {
  NonFiniteLogits(const std::string& what, int64_t position, double value)
      : ValueError(what), position(position), value(value) {}
  int64_t position;
  double value;
};

/// A ValueError naming the option for a temperature neither 0 nor in [kMinTemperature, kMaxTemperature], a negative top_k, or a top_p
/// outside (0, 1] ("top_p = 0 keeps no token").
void validate(const SamplingOptions& options);
/// The same, naming each field as names does (a command line's flags: "--top-p = 0 must be ...").
void validate(const SamplingOptions& options, const FieldNames& names);

/// One token drawn from logits (V values) under options, with one uniform draw from rng (none when greedy):
/// the logits divided by the temperature, the top_k largest kept (options.never left out), then the fewest
/// whose softmax reaches top_p, renormalised. Ties go to the smaller id. Logits that are not all finite are
/// a NonFiniteLogits (position 0); a `never` that leaves no token, a ValueError.
int64_t sample_token(std::span<const double> logits, const SamplingOptions& options, Generator& rng);

struct GeneratedToken {
  int64_t id;
  double log_prob;  // log p(id | what came before) under the model itself (before temperature, top-k, top-p)
};

/// max_new_tokens tokens after prompt (at least one token), each passed to on_token as it comes (may be
/// empty). use_cache: over KV caches, when the model supports them (LanguageModel::supports_kv_cache);
/// otherwise the window is recomputed at each token. The model runs in eval mode, which is restored after.
/// A prompt id outside [0, V) is a ValueError naming it; logits that are not finite a NonFiniteLogits naming
/// the new token's position.
std::vector<GeneratedToken> generate(LanguageModel& model, std::span<const int64_t> prompt, int64_t max_new_tokens,
                                     const SamplingOptions& options, Generator& rng, bool use_cache = true,
                                     const std::function<void(const GeneratedToken&)>& on_token = {});

}  // namespace tapegrad::nn
