#pragma once
// A prompt that `generate` takes from a language model, for the commands tapegrad suggests (train's `try:`
// line, the hint of `predict` given a language model): they must run as printed.
#include <cstdint>
#include <span>
#include <string>

#include "train/data/tokenizer.h"

namespace tapegrad {

/// The text of the first of `tokens` (at most 16 and at most `context`) whose text encodes again to
/// 1 .. context tokens (an <unk> decodes to its five characters, a subword text may split otherwise); when
/// no start of them does (or there are none), the first token of the vocabulary whose text does. Texts of
/// spaces alone or with a control character (a newline, a tab) are passed over: the command is one line.
std::string suggested_prompt(const Tokenizer& tokenizer, std::span<const int64_t> tokens, int64_t context);

}  // namespace tapegrad
