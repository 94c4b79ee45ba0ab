#pragma once
// What libsentencepiece trusts in a model file and tapegrad does not. The library parses the model's
// protobuf safely, but a normalisation table inside it (NormalizerSpec.precompiled_charsmap: a Darts
// double-array trie and the strings it maps to) is used exactly as it is: a hostile table sends its lookups
// out of the table, into other memory, while the text is encoded (or, for the denormaliser's, decoded) - a
// crash or a read of whatever lies there, never an error; and its pieces are indexed in ways that crash on
// some texts (see below). So a model's bytes are checked here first.
#include <string>
#include <string_view>

namespace tapegrad {

/// Walks the protobuf wire format of SentencePiece's ModelProto (sentencepiece_model.proto) far enough to
/// find its pieces and its normaliser and denormaliser tables, as protobuf would read them (the last of
/// repeated values wins, a spec given twice is merged). Each piece's text is non-empty, holds no NUL byte and
/// is at most 4 KiB (the library indexes pieces as C strings, in a trie built recursively: an empty key
/// throws out of the library, a piece of 128 KiB overflows the stack). Each table is checked: every lookup
/// the library can make stays in the table, every mapped string starts inside it, and no text matches more
/// rules at once than the library's fixed room for them (32). An IOError "<source>: not a SentencePiece model
/// (<field>: what is wrong)" for empty bytes, a malformed wire format, piece or table; the library checks the
/// rest itself as it loads the bytes.
void check_sentencepiece_model_bytes(std::string_view bytes, const std::string& source);

}  // namespace tapegrad
