// libFuzzer target: tokenizer.json, read as Tokenizer::load reads it, each input two ways. First as the file's
// text (the JSON, the base64 and the model inside). Then as the bytes of a SentencePiece model, which this
// target wraps in base64 itself: a mutation of the model's bytes in the file's text would mostly break the
// base64, so this is the way that reaches the model's parser (libsentencepiece's protobuf reading). An
// accepted tokenizer reads back from its own to_json equal, has a text for every id, and encodes and decodes
// a short text from the input and a probe of many characters (ids in range) with nothing thrown but a
// tapegrad::Error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/error.h"
#include "train/data/tokenizer.h"
#include "train/io/base64.h"
#include "train/io/strict_json.h"
#include "train/io/text_lines.h"

using namespace tapegrad;

namespace {

/// The input's longest valid UTF-8 prefix, at most 64 bytes: a text for the tokenizer to encode.
std::string sample_text(std::string_view input) {
  std::string_view text = input.substr(0, 64);
  text = text.substr(0, find_invalid_utf8(text));
  return std::string(text);
}

/// Every ASCII character and a few longer ones, so that a model's normalisation table is looked up along
/// many of its paths whatever the input's own text (a model's bytes hold few characters).
std::string probe_text() {
  std::string text;
  for (int c = 0; c < 128; ++c) text += static_cast<char>(c);
  return text + "\u00e9\u00f1\ufb01\u4e2d\U0001f600 ..";
}

void check_accepted(const Tokenizer& tokenizer, std::string_view input) {
  if (tokenizer.vocab_size() < 1) __builtin_trap();
  const Tokenizer again = Tokenizer::from_json(tokenizer.to_json(), "tokenizer.json");
  if (!(again == tokenizer) || again.vocab_size() != tokenizer.vocab_size()) __builtin_trap();
  for (int64_t id = 0; id < tokenizer.vocab_size(); ++id)
    if (again.token(id) != tokenizer.token(id)) __builtin_trap();
  static const std::string probe = probe_text();
  for (const std::string& text : {sample_text(input), probe}) {
    try {
      const std::vector<int64_t> ids = tokenizer.encode(text);
      for (const int64_t id : ids)
        if (id < 0 || id >= tokenizer.vocab_size()) __builtin_trap();
      tokenizer.decode(ids);
    } catch (const Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  try {  // as Tokenizer::load reads the file's text
    const Tokenizer tokenizer = Tokenizer::from_json(parse_json_strictly(input, "tokenizer.json", 2), "tokenizer.json");
    check_accepted(tokenizer, input);
  } catch (const Error&) {
  }
  try {  // the input as the model's bytes
    const nlohmann::json file = {{"kind", "bpe"}, {"model", base64_encode(input)}};
    const Tokenizer tokenizer = Tokenizer::from_json(file, "tokenizer.json");
    check_accepted(tokenizer, input);
  } catch (const Error&) {
  }
  return 0;
}
