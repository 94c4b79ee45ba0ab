// base64 (train/io/base64.h), which keeps a SentencePiece model inside tokenizer.json: RFC 4648's test
// vectors, every byte value both ways, and each malformed text refused with the character at fault.
#include <catch2/catch.hpp>
#include <string>

#include "autograd/error.h"
#include "train/io/base64.h"

using namespace tapegrad;

TEST_CASE("base64: RFC 4648's test vectors, and every byte value round trips") {
  // RFC 4648 §10.
  const std::pair<std::string, std::string> vectors[] = {{"", ""},         {"f", "Zg=="},     {"fo", "Zm8="},
                                                         {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [bytes, text] : vectors) {
    CHECK(base64_encode(bytes) == text);
    CHECK(base64_decode(text) == bytes);
  }
  // Every byte value, at each of the three positions of a group, and each length's padding.
  std::string all;
  for (int i = 0; i < 256 * 3 + 2; ++i) all += static_cast<char>(i * 7 % 256);
  for (size_t n = 0; n <= all.size(); n += 97)
    CHECK(base64_decode(base64_encode(all.substr(0, n))) == all.substr(0, n));
  CHECK(base64_encode("\xFF\xFE") == "//4=");
}

TEST_CASE("base64: a malformed text is a ValueError naming the character") {
  CHECK_THROWS_WITH(base64_decode("Zm9"), "base64: 3 characters, not a multiple of 4");
  CHECK_THROWS_WITH(base64_decode("Zm9v YmFy"), "base64: 9 characters, not a multiple of 4");
  CHECK_THROWS_WITH(base64_decode("Zm9\nYmFy"), "base64: character 4 is not in the base64 alphabet");
  CHECK_THROWS_WITH(base64_decode("Zm-v"), "base64: character 3 is not in the base64 alphabet");  // base64url's '-'
  CHECK_THROWS_WITH(base64_decode("Zg==Zm9v"), "base64: character 3 '=' pads only the end of the text");
  CHECK_THROWS_WITH(base64_decode("Z=8="), "base64: character 2 '=' pads only the end of the text");
  // "Zh==" would be 'f' with bits set after its 8: another text for the same byte, refused.
  CHECK_THROWS_WITH(base64_decode("Zh=="), "base64: character 2 has bits set past the last byte");
  CHECK_THROWS_WITH(base64_decode("Zm9="), "base64: character 3 has bits set past the last byte");
  CHECK_THROWS_AS(base64_decode("===="), ValueError);
}
