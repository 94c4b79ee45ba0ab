#pragma once
// A fingerprint of bytes: 64-bit FNV-1a, as 16 hex digits. It tells whether two files or texts are the same
// (trainer.json keeps the training data's, config.json a language model's tokenizer's), not who made them:
// anyone who can edit the file can edit the fingerprint beside it, so a cryptographic hash would buy nothing.
// Different inputs collide with probability about 2^-64, and a change of one byte always changes it.
#include <cstdint>
#include <string>
#include <string_view>

namespace tapegrad {

class Fingerprint {
 public:
  /// Adds bytes, then `end` (a separator, so that "ab" + "c" and "a" + "bc" differ).
  void mix(std::string_view bytes, char end);
  /// The 16 lowercase hex digits of the hash so far.
  std::string hex() const;

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;  // FNV-1a's offset basis
};

/// Fingerprint of text alone (mixed with a '\n' end).
std::string fingerprint(std::string_view text);

}  // namespace tapegrad
