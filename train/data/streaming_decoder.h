#pragma once
// The text a growing sequence of token ids adds, token by token, for printing as it is generated.
// Decoding the whole sequence at every token would keep exactly what decode() puts between tokens (a word's
// space, SentencePiece's joined pieces) but costs O(n) per token, O(n²) for a run: 40 000 tokens took
// 30 times as long as 5 000. Instead only a tail of the sequence is decoded again: the ids since an anchor
// that moves forward whenever the tail's text is known to end with the text of its newer half, so that each
// token decodes at most 2 · kTail ids and the printed text is still decode(all ids), byte for byte.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "train/data/tokenizer.h"

namespace tapegrad {

class StreamingDecoder {
 public:
  /// The ids after which the anchor may move: enough that a tokenizer's joining reaches no further back.
  static constexpr size_t kTail = 16;

  /// Starts from `ids` (a prompt), none of whose text is taken yet.
  StreamingDecoder(const Tokenizer& tokenizer, std::vector<int64_t> ids);

  /// Appends `id` and returns the text that is new since the last call (the prompt's text with the first
  /// call). A trailing U+FFFD, SentencePiece's mark for a character whose bytes are still to come from the
  /// next pieces, is held back until the character is whole, or until finish().
  std::string add(int64_t id);
  /// The text held back (a character left incomplete at the end), once no token follows.
  std::string finish();

  /// decode() of every id so far: the whole text, computed once.
  std::string text() const { return tokenizer_.decode(ids_); }
  /// How many ids the last add() decoded: at most 2 · kTail once past the prompt (tested).
  size_t ids_decoded_last() const { return ids_decoded_last_; }

 private:
  void move_anchor();

  const Tokenizer& tokenizer_;
  std::vector<int64_t> ids_;
  size_t anchor_ = 0;       // ids_[anchor_..] is the tail decoded again at every token
  std::string tail_;        // decode(ids_[anchor_..])
  size_t taken_ = 0;        // bytes of tail_ already returned
  size_t ids_decoded_last_ = 0;
};

}  // namespace tapegrad
