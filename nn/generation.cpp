#include "nn/generation.h"

#include <algorithm>
#include <cmath>

#include "autograd/error.h"
#include "autograd/ops/views.h"
#include "autograd/tape.h"

namespace tapegrad::nn {

void validate(const SamplingOptions& o, const FieldNames& names) {
  // Outside [1e-3, 1e3] logits of order 1 give a distribution that is one-hot or uniform to within 0.1%: the
  // text would be greedy's, or independent of the model (as the attention temperature's range, for the same
  // reason). 0 is greedy itself.
  if (!(o.temperature == 0 || (o.temperature >= kMinTemperature && o.temperature <= kMaxTemperature)))
    throw ValueError(cat(names("temperature"), " = ", o.temperature, " must be 0 (greedy) or in [", kMinTemperature, ", ",
                         kMaxTemperature, "]"));
  if (o.top_k < 0) throw ValueError(cat(names("top_k"), " = ", o.top_k, " must be >= 0 (0: every token)"));
  if (!(o.top_p > 0 && o.top_p <= 1))
    throw ValueError(cat(names("top_p"), " = ", o.top_p, " must be in (0, 1]", o.top_p == 0 ? ": 0 keeps no token" : ""));
}

void validate(const SamplingOptions& o) {
  validate(o, [](std::string_view field) { return std::string(field); });
}

int64_t sample_token(std::span<const double> logits, const SamplingOptions& options, Generator& rng) {
  validate(options);
  if (logits.empty()) throw ValueError("sample_token: no logits");
  for (const double l : logits)  // a NaN would not sort, and an infinity leaves no distribution
    if (!std::isfinite(l)) {
      const double largest = *std::max_element(logits.begin(), logits.end());
      throw NonFiniteLogits(cat("sample_token: a logit is ", l, " (the largest ", largest, "), not a finite number"), 0,
                            std::isnan(l) ? l : largest);
    }
  // Most likely first; equal logits by id, so that the same logits always give the same order.
  std::vector<int64_t> order;
  order.reserve(logits.size());
  for (int64_t id = 0; id < static_cast<int64_t>(logits.size()); ++id)
    if (id != options.never) order.push_back(id);
  if (order.empty()) throw ValueError(cat("sample_token: the only token is ", options.never, ", which is never drawn"));
  const auto V = static_cast<int64_t>(order.size());
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  if (options.temperature == 0) return order.front();
  const int64_t kept = options.top_k > 0 ? std::min(options.top_k, V) : V;
  // softmax(logits / τ) over the kept tokens, from the largest (exp(0) = 1) down.
  std::vector<double> probs(static_cast<size_t>(kept));
  double total = 0;
  for (int64_t i = 0; i < kept; ++i)
    total += probs[i] = std::exp((logits[order[i]] - logits[order.front()]) / options.temperature);
  // The nucleus: the fewest tokens whose probabilities reach top_p of the kept mass.
  int64_t nucleus = 0;
  double mass = 0;
  while (nucleus < kept && (nucleus == 0 || mass < options.top_p * total)) mass += probs[nucleus++];
  double u = rng.uniform() * mass;
  for (int64_t i = 0; i < nucleus; ++i) {
    if (u < probs[i]) return order[i];
    u -= probs[i];
  }
  return order[nucleus - 1];  // u landed on the rounding left at the top of the mass
}

namespace {

/// The last position's logits of (1, T, V) as doubles.
std::vector<double> last_logits(const Tensor& logits) {
  return select(select(logits, 0, 0), 0, logits.size(1) - 1).to_vector();
}

/// log softmax(logits)[id], computed stably.
double log_probability(const std::vector<double>& logits, int64_t id) {
  const double top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (const double l : logits) sum += std::exp(l - top);
  return logits[static_cast<size_t>(id)] - top - std::log(sum);
}


}  // namespace

std::vector<GeneratedToken> generate(LanguageModel& model, std::span<const int64_t> prompt, int64_t max_new_tokens,
                                     const SamplingOptions& options, Generator& rng, bool use_cache,
                                     const std::function<void(const GeneratedToken&)>& on_token) {
  validate(options);
  const int64_t context = model.options().context_length, V = model.options().vocab_size;
  if (prompt.empty()) throw ValueError("generate: the prompt is empty: give at least one token");
  if (static_cast<int64_t>(prompt.size()) > context)
    throw ValueError(cat("generate: the prompt's ", prompt.size(), " tokens are more than the context length ", context));
  for (const int64_t id : prompt)
    if (id < 0 || id >= V) throw ValueError(cat("generate: prompt token id ", id, " is outside the vocabulary [0, ", V, ")"));
  if (max_new_tokens < 0) throw ValueError(cat("generate: max_new_tokens = ", max_new_tokens, " must be >= 0"));
  EvalModeGuard eval(model);
  NoGradGuard inference;
  const bool cached = use_cache && model.supports_kv_cache();
  std::vector<KeyValueCache> caches = cached ? model.make_kv_caches() : std::vector<KeyValueCache>{};
  const auto as_ids = [](std::span<const int64_t> window) {
    return ids(std::vector<int64_t>(window.begin(), window.end()), {1, static_cast<int64_t>(window.size())});
  };
  // The logits after the whole window (a restart, or the prompt), or after its newest token from the caches.
  const auto run_window = [&](const std::vector<int64_t>& window) {
    if (!cached) return last_logits(model.forward(as_ids(window)));
    for (KeyValueCache& cache : caches) cache.clear();
    return last_logits(model.forward_cached(as_ids(window), caches));
  };
  std::vector<int64_t> window(prompt.begin(), prompt.end());
  std::vector<double> logits = run_window(window);
  std::vector<GeneratedToken> out;
  out.reserve(static_cast<size_t>(max_new_tokens));
  for (int64_t n = 0; n < max_new_tokens; ++n) {
    int64_t id;
    try {
      id = sample_token(logits, options, rng);
    } catch (const NonFiniteLogits& e) {
      throw NonFiniteLogits(cat("generate: the logits of new token ", n + 1, " are not finite (the largest is ", e.value, ")"),
                            n, e.value);
    }
    out.push_back({id, log_probability(logits, id)});
    if (on_token) on_token(out.back());
    if (n + 1 == max_new_tokens) break;
    if (static_cast<int64_t>(window.size()) == context) {  // full: restart at the last half (rounded up)
      // ... but at most context - 1 tokens, leaving the new one its place: a context of 1 keeps none.
      window.erase(window.begin(), window.end() - std::min((context + 1) / 2, context - 1));
      window.push_back(id);
      logits = run_window(window);
    } else {
      window.push_back(id);
      logits = cached ? last_logits(model.forward_cached(as_ids(std::span(&window.back(), 1)), caches))
                      : last_logits(model.forward(as_ids(window)));
    }
  }
  return out;
}

}  // namespace tapegrad::nn
