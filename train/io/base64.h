#pragma once
// Base64 (RFC 4648 §4: the standard alphabet with '=' padding), to keep binary bytes inside a JSON file:
// tokenizer.json holds a SentencePiece model this way, so that a run directory needs no second file.
// Decoding is strict, as every reader of a file from elsewhere is: a character outside the alphabet
// (whitespace included), a length that is not a multiple of 4, padding anywhere but at the end, and
// non-zero bits after the last byte are refused, so that each byte string has exactly one text.
#include <string>
#include <string_view>

namespace tapegrad {

/// The base64 text of bytes: 4 characters for every 3 bytes, the last group padded with '='.
std::string base64_encode(std::string_view bytes);
/// The bytes of a base64 text; a ValueError naming the first bad character (from 1) and what is wrong.
std::string base64_decode(std::string_view text);

}  // namespace tapegrad
