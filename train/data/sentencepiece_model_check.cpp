#include "train/data/sentencepiece_model_check.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "autograd/error.h"

namespace tapegrad {

namespace {

// sentencepiece_model.proto: ModelProto's pieces, normalizer_spec and denormalizer_spec; a piece's text
// (SentencePiece.piece); NormalizerSpec's table.
constexpr uint64_t kPieces = 1;
constexpr uint64_t kPieceText = 1;
constexpr uint64_t kNormalizerSpec = 3;
constexpr uint64_t kDenormalizerSpec = 5;
constexpr uint64_t kPrecompiledCharsmap = 2;
constexpr int kLengthDelimited = 2;  // the wire type of bytes and embedded messages

// normalizer.h's kMaxTrieResultsSize: the rules one text can match at once, in an array on the stack.
constexpr int kMostRulesAtOnce = 32;

// The longest piece read. The library indexes pieces in a Darts-clone trie, which it builds recursively, a
// stack frame or so per byte of the longest piece: a piece of 128 KiB overflowed the 8 MiB stack (0.1.97, on
// Zen 3). SentencePiece's trainer makes pieces of at most 512 characters (2 KiB of UTF-8).
constexpr size_t kLongestPiece = 4096;

[[noreturn]] void refuse(const std::string& source, std::string_view field, const std::string& what) {
  throw IOError(cat(source, ": not a SentencePiece model (", field, ": ", what, ")"));
}

struct WireField {
  uint64_t number = 0;
  int wire_type = 0;
  std::string_view bytes;  // a length-delimited field's contents
};

/// One protobuf message's fields in order, each checked to lie inside the message.
class WireFields {
 public:
  WireFields(std::string_view message, const std::string& source, std::string_view what)
      : message_(message), source_(source), what_(what) {}

  bool next(WireField& field) {
    if (at_ == message_.size()) return false;
    const uint64_t tag = varint();
    field.number = tag >> 3;
    field.wire_type = static_cast<int>(tag & 7);
    if (tag > UINT32_MAX || field.number == 0) refuse(source_, what_, cat("a field tag of ", tag, " at byte ", at_));
    switch (field.wire_type) {
      case 0: varint(); break;
      case 1: skip(8); break;
      case kLengthDelimited: {
        const uint64_t length = varint();
        field.bytes = message_.substr(at_, std::min<uint64_t>(length, message_.size() - at_));
        skip(length);
        break;
      }
      case 5: skip(4); break;
      default:  // groups (3, 4), deprecated and in no SentencePiece model, and the undefined 6 and 7
        refuse(source_, what_, cat("wire type ", field.wire_type, " (field ", field.number, ")"));
    }
    return true;
  }

 private:
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ == message_.size()) refuse(source_, what_, "a number runs past the end");
      const auto byte = static_cast<unsigned char>(message_[at_++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    refuse(source_, what_, cat("a number longer than 10 bytes at byte ", at_));
  }
  void skip(uint64_t n) {
    if (n > message_.size() - at_)
      refuse(source_, what_, cat("a field of ", n, " bytes at byte ", at_, ", with ", message_.size() - at_, " left"));
    at_ += n;
  }

  std::string_view message_;
  const std::string& source_;
  std::string_view what_;
  size_t at_ = 0;
};

/// The units of a Darts-clone double array: a node's children sit at (its position ^ its offset) ^ label.
struct DoubleArray {
  std::string_view units;
  uint32_t size() const { return static_cast<uint32_t>(units.size() / 4); }
  uint32_t unit(uint32_t at) const {
    uint32_t u = 0;
    for (int k = 3; k >= 0; --k) u = u << 8 | static_cast<unsigned char>(units[4 * size_t{at} + k]);
    return u;
  }
  bool has_leaf(uint32_t at) const { return (unit(at) >> 8 & 1) != 0; }
  uint32_t label(uint32_t at) const { return unit(at) & (1u << 31 | 0xff); }
  uint32_t children(uint32_t at) const { return at ^ ((unit(at) >> 10) << ((unit(at) & (1u << 9)) >> 6)); }
  uint32_t value(uint32_t at) const { return unit(at) & ~(1u << 31); }
};

/// The table: <trie's size in bytes, 4 bytes little-endian><trie><the mapped strings, each NUL-ended>. The
/// library looks up every label of a node's children, so each node's block of 256 must lie in the trie; it
/// also follows every match, so the trie must have no cycle, and keep to its room for matches on each path.
void check_charsmap(std::string_view table, const std::string& source, std::string_view field) {
  if (table.empty()) return;  // no table: the library normalises nothing
  if (table.size() <= 4) refuse(source, field, cat(table.size(), " bytes, too short to hold a trie's size"));
  uint32_t trie_bytes = 0;
  for (int k = 3; k >= 0; --k) trie_bytes = trie_bytes << 8 | static_cast<unsigned char>(table[k]);
  if (trie_bytes > table.size() - 4)
    refuse(source, field, cat("a trie of ", trie_bytes, " bytes in ", table.size() - 4, " bytes"));
  const DoubleArray trie{table.substr(4, trie_bytes)};
  const size_t strings = table.size() - 4 - trie_bytes;
  if (trie.size() == 0) refuse(source, field, "an empty trie");

  enum : uint8_t { unseen, on_path, done };
  std::vector<uint8_t> state(trie.size(), unseen);
  std::vector<uint8_t> most_rules(trie.size(), 0);  // below a node, capped past the room
  struct Frame {
    uint32_t node;
    uint32_t next_label;
    int most;
  };
  std::vector<Frame> path;
  const auto enter = [&](uint32_t node) {
    if ((trie.children(node) | 0xff) >= trie.size())
      refuse(source, field, cat("node ", node, "'s children lie past the trie's ", trie.size(), " units"));
    if (node != 0 && trie.has_leaf(node) && trie.value(trie.children(node)) >= strings)
      refuse(source, field, cat("node ", node, " maps to byte ", trie.value(trie.children(node)), " of ",
                                strings, " bytes of strings"));
    state[node] = on_path;
    path.push_back({node, 0, 0});
  };
  enter(0);
  while (!path.empty()) {
    Frame& frame = path.back();
    if (frame.next_label <= 0xff) {
      const uint32_t label = frame.next_label++;
      const uint32_t child = trie.children(frame.node) ^ label;
      if (trie.label(child) != label) continue;
      if (state[child] == on_path) refuse(source, field, cat("node ", child, " is its own descendant"));
      if (state[child] == unseen) enter(child);
      else frame.most = std::max(frame.most, most_rules[child] + int{trie.has_leaf(child)});
      continue;
    }
    const uint32_t node = frame.node;
    most_rules[node] = static_cast<uint8_t>(std::min(frame.most, kMostRulesAtOnce + 1));
    state[node] = done;
    path.pop_back();
    if (!path.empty()) path.back().most = std::max(path.back().most, most_rules[node] + int{trie.has_leaf(node)});
  }
  if (most_rules[0] > kMostRulesAtOnce)
    refuse(source, field, cat("a text can match more than ", kMostRulesAtOnce, " of its rules at once, where ",
                              "SentencePiece has room for ", kMostRulesAtOnce));
}

/// A piece's text as the library indexes it: as a C string, so a NUL byte ends it (one at the start is an
/// empty key, which the trie's builder throws for), and in a trie built recursively (kLongestPiece).
void check_piece(std::string_view message, int64_t index, const std::string& source) {
  const std::string where = cat("piece ", index);
  std::string_view text;  // no text field: the empty string, as protobuf reads it
  WireFields piece(message, source, where);
  for (WireField field; piece.next(field);)
    if (field.number == kPieceText && field.wire_type == kLengthDelimited) text = field.bytes;
  if (text.empty()) refuse(source, where, "an empty piece");
  if (text.find('\0') != std::string_view::npos) refuse(source, where, "a NUL byte in the piece");
  if (text.size() > kLongestPiece)
    refuse(source, where, cat("a piece of ", text.size(), " bytes, where the longest read is ", kLongestPiece));
}

}  // namespace

void check_sentencepiece_model_bytes(std::string_view bytes, const std::string& source) {
  if (bytes.empty()) throw IOError(cat(source, ": not a SentencePiece model (empty)"));
  std::optional<std::string_view> normalizer_table, denormalizer_table;
  WireFields model(bytes, source, "the ModelProto");
  int64_t pieces = 0;
  for (WireField field; model.next(field);) {
    if (field.wire_type != kLengthDelimited) continue;  // protobuf keeps a field of another wire type aside, unread
    if (field.number == kPieces) check_piece(field.bytes, pieces++, source);
    if (field.number != kNormalizerSpec && field.number != kDenormalizerSpec) continue;
    const bool normalizer = field.number == kNormalizerSpec;
    // A message given twice is merged, and its table is the last one given in either.
    WireFields spec(field.bytes, source, normalizer ? "normalizer_spec" : "denormalizer_spec");
    for (WireField inner; spec.next(inner);)
      if (inner.number == kPrecompiledCharsmap && inner.wire_type == kLengthDelimited)
        (normalizer ? normalizer_table : denormalizer_table) = inner.bytes;
  }
  if (normalizer_table) check_charsmap(*normalizer_table, source, "normalizer_spec.precompiled_charsmap");
  if (denormalizer_table) check_charsmap(*denormalizer_table, source, "denormalizer_spec.precompiled_charsmap");
}

}  // namespace tapegrad
