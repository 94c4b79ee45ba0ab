#include "train/cli/generate_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <vector>

#include "autograd/error.h"
#include "train/cli/checkpoint_outputs.h"
#include "train/cli/number_flags.h"
#include "train/cli/standard_output.h"
#include "train/data/streaming_decoder.h"
#include "train/io/text_lines.h"

namespace tapegrad::cli {

using nlohmann::json;

namespace {

constexpr std::string_view kWhat = "the generated text";  // what write_stdout names when stdout fails

/// The longest run of new tokens a command asks for: far past any context, short of a typo.
constexpr int64_t kMaxNewTokens = 1'000'000;

/// The prompt's token ids, refused when generation could not start from them: invalid UTF-8, no token, or
/// more tokens than the model's context (the model has never seen a position past it).
std::vector<int64_t> prompt_ids(const std::string& prompt, const LoadedLanguageModel& loaded) {
  if (const size_t bad = find_invalid_utf8(prompt); bad != prompt.size())
    throw ValueError(cat("--prompt: invalid UTF-8 at byte ", bad + 1));
  const std::vector<int64_t> ids = loaded.tokenizer.encode(prompt);
  if (ids.empty())
    throw ValueError(cat("--prompt: no token in '", prompt, "' (", tokenizer_kind_name(loaded.tokenizer.kind()),
                         " tokenizer): generation continues a prompt of at least one token"));
  const int64_t context = loaded.options.context_length;
  if (static_cast<int64_t>(ids.size()) > context)
    throw ValueError(cat("--prompt: ", ids.size(), " tokens, more than the model's context length ", context,
                         ": shorten it to its last ", context, " tokens or fewer"));
  return ids;
}

/// A flag that would have no effect is refused by name: greedy decoding (--temperature 0) draws nothing, so
/// neither the sampling flags nor the seed change its text; nor do the others with --top-k 1, which keeps
/// only the most likely token.
void refuse_flags_without_effect(const CLI::App& cmd, const GenerateFlags& f) {
  const auto refuse_given = [&](std::initializer_list<const char*> flags, const std::string& because) {
    for (const char* flag : flags)
      if (cmd.get_option(flag)->count() > 0) throw ValueError(cat(flag, " has no effect with ", because));
  };
  if (f.sampling.temperature == 0)
    refuse_given({"--top-k", "--top-p", "--seed"}, "--temperature 0, which always takes the most likely token");
  else if (f.sampling.top_k == 1)
    refuse_given({"--temperature", "--top-p", "--seed"}, "--top-k 1, which always takes the most likely token");
}

/// --top-k of all the checkpoint's tokens but <unk> (never drawn) or more keeps every one: no effect.
void refuse_top_k_of_whole_vocabulary(const GenerateFlags& f, int64_t vocab_size) {
  if (f.sampling.top_k > 0 && f.sampling.top_k >= vocab_size - 1)
    throw ValueError(cat("--top-k ", f.sampling.top_k, " has no effect: ", f.checkpoint, " has ", vocab_size - 1,
                         " tokens to draw from (all but <unk>); give fewer, or 0 for all"));
}

/// The prompt's characters the tokenizer lacks read as <unk>: said on stderr, since the model continues
/// another text than the one typed.
void note_unknown_prompt_tokens(const std::vector<int64_t>& prompt) {
  const auto unknown = std::count(prompt.begin(), prompt.end(), Tokenizer::kUnk);
  if (unknown > 0)
    std::fprintf(stderr, "note: --prompt: %lld of its %zu tokens are not in the checkpoint's tokenizer and read as <unk>\n",
                 static_cast<long long>(unknown), prompt.size());
}

}  // namespace

void add_generate(CLI::App& app, GenerateFlags& f) {
  auto* cmd = app.add_subcommand("generate", "Text from a language model's checkpoint, continuing --prompt");
  add_path_option(cmd, "--checkpoint", f.checkpoint, "Checkpoint directory of `train --task lm` (a run directory or its best/)")
      ->required();
  cmd->add_option("--prompt", f.prompt, "The text to continue (at least one token, at most the context length)")->required();
  add_integer_option(cmd, "--max-new-tokens", f.max_new_tokens, "Tokens to generate after the prompt")->capture_default_str();
  add_real_option(cmd, "--temperature", f.sampling.temperature, "Divides the logits before sampling, in [0.001, 1000]; 0: always the most likely token")
      ->capture_default_str();
  add_integer_option(cmd, "--top-k", f.sampling.top_k, "Sample among the k most likely tokens only (0: all)")->capture_default_str();
  add_real_option(cmd, "--top-p", f.sampling.top_p, "Sample among the fewest most likely tokens whose probabilities reach p, in (0, 1]")
      ->capture_default_str();
  add_integer_option(cmd, "--seed", f.seed, "Seed of the sampling: the same seed gives the same text")->capture_default_str();
  cmd->add_flag("--no-cache", f.no_cache, "Recompute the whole window at every token instead of keeping each layer's keys and values (slower; the same text)");
  cmd->add_flag("--json", f.json, "Print one JSON object at the end: the prompt, each new token with its id and log-probability, the text");
  cmd->callback([&f, cmd] {
    // Before the checkpoint is read: a flag's mistake is named first, by the flag.
    nn::validate(f.sampling, [](std::string_view field) {
      std::string flag = cat("--", field);
      std::replace(flag.begin(), flag.end(), '_', '-');
      return flag;
    });
    if (f.max_new_tokens < 1 || f.max_new_tokens > kMaxNewTokens)
      throw ValueError(cat("--max-new-tokens must be in [1, ", kMaxNewTokens, "], got ", f.max_new_tokens));
    refuse_flags_without_effect(*cmd, f);
    LoadedLanguageModel loaded = load_language_model_for_outputs(f.checkpoint, f.prompt);
    if (f.no_cache && !loaded.model->supports_kv_cache())
      throw ValueError(cat("--no-cache has no effect: the attention of ", f.checkpoint,
                           " keeps no cache, so every token recomputes its window anyway"));
    if (loaded.tokenizer.vocab_size() < 2)
      throw IOError(cat(f.checkpoint, "/tokenizer.json: no token but <unk>: there is no text to generate"));
    refuse_top_k_of_whole_vocabulary(f, loaded.tokenizer.vocab_size());
    const std::vector<int64_t> prompt = prompt_ids(f.prompt, loaded);
    note_unknown_prompt_tokens(prompt);
    StreamingDecoder text(loaded.tokenizer, prompt);  // the prompt is printed with the first new token, once
                                                      // its logits were found finite
    Generator rng(f.seed);
    const bool cached = !f.no_cache && loaded.model->supports_kv_cache();
    nn::SamplingOptions sampling = f.sampling;
    sampling.never = Tokenizer::kUnk;  // <unk> stands for text the tokenizer lacks: no text to write
    const auto start = std::chrono::steady_clock::now();
    std::vector<nn::GeneratedToken> tokens;
    try {
      tokens = nn::generate(*loaded.model, prompt, f.max_new_tokens, sampling, rng, cached,
                            [&](const nn::GeneratedToken& token) {
                                if (f.json) return;
                                write_stdout(text.add(token.id), kWhat);
                              });
    } catch (const nn::NonFiniteLogits& e) {
      throw ValueError(cat(f.checkpoint, ": the logits of new token ", e.position + 1, " are not finite (the largest is ",
                           e.value, ") ", overflow_cause(*loaded.model, nn::body_options(loaded.options))));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (f.json) {
      json generated = json::array();
      for (const nn::GeneratedToken& t : tokens)
        generated.push_back({{"id", t.id}, {"text", loaded.tokenizer.token(t.id)}, {"log_prob", t.log_prob}});
      for (const nn::GeneratedToken& t : tokens) text.add(t.id);
      write_stdout(json{{"prompt", f.prompt},  {"prompt_tokens", prompt}, {"tokens", generated},
                        {"text", text.text()}, {"kv_cache", cached},      {"seconds", seconds}}
                       .dump() + "\n", kWhat);
      return;
    }
    write_stdout(text.finish() + "\n", kWhat);  // the text, all of it written, before the timing line, where both go to one terminal
    std::fprintf(stderr, "%zu tokens in %.2f s (%.1f tokens/s, %s)\n", tokens.size(), seconds,
                 static_cast<double>(tokens.size()) / std::max(seconds, 1e-9),
                 cached ? "KV cache" : "no cache: --no-cache");
  });
}

}  // namespace tapegrad::cli
