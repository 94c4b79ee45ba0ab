#include "train/io/fingerprint.h"

#include <cstdio>

namespace tapegrad {

void Fingerprint::mix(std::string_view bytes, char end) {
  constexpr uint64_t kPrime = 0x100000001b3ULL;  // FNV-1a's 64-bit prime
  for (char c : bytes) hash_ = (hash_ ^ static_cast<unsigned char>(c)) * kPrime;
  hash_ = (hash_ ^ static_cast<unsigned char>(end)) * kPrime;
}

std::string Fingerprint::hex() const {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash_));
  return text;
}

std::string fingerprint(std::string_view text) {
  Fingerprint hash;
  hash.mix(text, '\n');
  return hash.hex();
}

}  // namespace tapegrad
