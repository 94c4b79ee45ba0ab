#include "train/data/suggested_prompt.h"

#include <algorithm>

namespace tapegrad {

namespace {

/// Whether `text` makes a good prompt for a command printed on one line: generate takes it, and it has a
/// character to see and no control character (a newline would split the printed command).
bool generate_takes(const Tokenizer& tokenizer, const std::string& text, int64_t context) {
  const auto is_control = [](unsigned char c) { return c < 0x20 || c == 0x7f; };
  if (std::any_of(text.begin(), text.end(), is_control) || text.find_first_not_of(' ') == std::string::npos) return false;
  const auto encoded = static_cast<int64_t>(tokenizer.encode(text).size());
  return encoded >= 1 && encoded <= context;
}

}  // namespace

std::string suggested_prompt(const Tokenizer& tokenizer, std::span<const int64_t> tokens, int64_t context) {
  for (auto n = std::min<int64_t>({static_cast<int64_t>(tokens.size()), context, 16}); n > 0; --n) {
    std::string text = tokenizer.decode(tokens.first(static_cast<size_t>(n)));
    if (generate_takes(tokenizer, text, context)) return text;
  }
  for (int64_t id = 1; id < tokenizer.vocab_size(); ++id)
    if (generate_takes(tokenizer, tokenizer.token(id), context)) return tokenizer.token(id);
  return tokenizer.token(tokenizer.vocab_size() > 1 ? 1 : 0);  // a tokenizer of <unk> alone: generate refuses it
}

}  // namespace tapegrad
