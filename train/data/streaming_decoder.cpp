#include "train/data/streaming_decoder.h"

#include <algorithm>
#include <string_view>

namespace tapegrad {

namespace {

/// The length of `text` without its trailing run of U+FFFD (EF BF BD): a character still incomplete.
size_t without_pending_replacements(std::string_view text) {
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  size_t end = text.size();
  while (end >= kReplacement.size() && text.substr(end - kReplacement.size(), kReplacement.size()) == kReplacement)
    end -= kReplacement.size();
  return end;
}

}  // namespace

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, std::vector<int64_t> ids)
    : tokenizer_(tokenizer), ids_(std::move(ids)) {
  tail_ = tokenizer_.decode(ids_);
}

std::string StreamingDecoder::add(int64_t id) {
  ids_.push_back(id);
  const std::span<const int64_t> tail_ids = std::span<const int64_t>(ids_).subspan(anchor_);
  std::string now = tokenizer_.decode(tail_ids);
  ids_decoded_last_ = tail_ids.size();
  // What was returned is a prefix of the new tail for every tokenizer of tapegrad's own; one made elsewhere
  // could rewrite it (pieces joined across tokens), and text on a terminal cannot be taken back: then only
  // what lies past it is new.
  const size_t stable = without_pending_replacements(now);
  std::string fresh = stable > taken_ ? now.substr(taken_, stable - taken_) : std::string();
  taken_ = std::max(taken_, stable);
  tail_ = std::move(now);
  move_anchor();
  return fresh;
}

std::string StreamingDecoder::finish() {
  std::string rest = tail_.size() > taken_ ? tail_.substr(taken_) : std::string();
  taken_ = tail_.size();
  return rest;
}

void StreamingDecoder::move_anchor() {
  if (ids_.size() - anchor_ < 2 * kTail) return;
  const size_t anchor = ids_.size() - kTail;
  std::string newer = tokenizer_.decode(std::span<const int64_t>(ids_).subspan(anchor));
  // The move keeps decode(all) intact only if the old tail's text ends with the newer half's (a word's
  // separating space or SentencePiece's leading one stays with the older half): otherwise the anchor stays,
  // and the next token tries again.
  if (newer.size() > tail_.size() || tail_.compare(tail_.size() - newer.size(), newer.size(), newer) != 0) return;
  const size_t dropped = tail_.size() - newer.size();
  if (dropped > taken_) return;  // the dropped text is not all returned yet
  taken_ -= dropped;
  tail_ = std::move(newer);
  anchor_ = anchor;
}

}  // namespace tapegrad
