#pragma once
// What tokenizer.cpp and tokenizer_bpe.cpp share about SentencePiece's errors. Declared without SentencePiece's
// headers, so that no header of train/data needs them (CMakeLists.txt).
#include <string>

namespace sentencepiece::util {
class Status;
}  // namespace sentencepiece::util

namespace tapegrad {

/// What SentencePiece says went wrong, without the source file and the failed condition it puts first
/// ("./src/trainer_interface.cc(660) [...] "), which tell a user nothing; `otherwise` when nothing else is left.
std::string sentencepiece_reason(const sentencepiece::util::Status& status, const char* otherwise);

}  // namespace tapegrad
