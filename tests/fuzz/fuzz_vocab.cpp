// libFuzzer target: vocab.txt and labels.txt on arbitrary text, and the whitespace tokenizer. An accepted
// vocabulary reads back from its own text unchanged; a vocabulary built from the text encodes and decodes
// it to its words joined by single spaces; an accepted label list has no empty, duplicate or tabbed label.
// Anything else must be a tapegrad::Error.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "autograd/error.h"
#include "train/checkpoint/checkpoint.h"
#include "train/data/vocab.h"

using namespace tapegrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const Vocab vocab = Vocab::parse(text, "vocab.txt");
    if (!(Vocab::parse(vocab.text(), "vocab.txt") == vocab)) __builtin_trap();
    for (int64_t id = 0; id < vocab.size(); ++id)
      if (vocab.id(vocab.token(id)) != id) __builtin_trap();
  } catch (const Error&) {
  }
  try {
    const std::vector<std::string> labels = parse_labels(text, "labels.txt");
    if (std::set<std::string>(labels.begin(), labels.end()).size() != labels.size()) __builtin_trap();
  } catch (const Error&) {
  }
  // The tokenizer takes any bytes: build, encode, decode.
  const std::string input(text);
  const Vocab built = Vocab::build({input});
  const std::vector<int64_t> ids = built.encode(input);
  std::string words;
  for (const std::string& w : split_words(input)) words += (words.empty() ? "" : " ") + w;
  // Every word is in a vocabulary built from the text (a word spelled like a reserved token keeps the
  // reserved id, which decodes to the same spelling), so decoding gives the words back.
  if (built.decode(ids) != words) __builtin_trap();
  return 0;
}
