#pragma once
// Batching: labelled texts -> padded id tensors, the key padding mask and class targets.
// Each text is encoded with the vocabulary, optionally given a leading <cls>, cut to the context length
// (keeping its first tokens) and padded with <pad> (0) to the longest sequence of the batch.
// An empty text is encoded as a single <unk>: a row of only padding would leave nothing to attend to and
// make mean pooling divide by zero.
// The mask is positional (true past a sequence's end), so a word spelled "<pad>" inside a text is not masked.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "train/data/tasks.h"
#include "train/data/vocab.h"

namespace tapegrad {

struct Batch {
  Tensor ids;               // (B, T) int64, <pad> = 0 past each sequence's end
  Tensor key_padding_mask;  // (B, T) bool, true = pad
  Tensor targets;           // (B) int64, the index of each example's label in the label list
  int64_t truncated = 0;    // sequences cut to the context length
};

/// One text as the model reads it: its word ids, <cls> first when asked, an empty text as one <unk>, cut
/// to its first context_length ids (*truncated, when given, says whether it was). context_length < 1
/// (< 2 with <cls>) is a ValueError.
std::vector<int64_t> encode_text(const std::string& text, const Vocab& vocab, int64_t context_length,
                                 bool prepend_cls, bool* truncated = nullptr);

struct PaddedIds {
  Tensor ids;               // (B, T) int64, <pad> = 0 past each sequence's end
  Tensor key_padding_mask;  // (B, T) bool, true = pad
};

/// The sequences at `rows` (B indices into `sequences`, in that order; each non-empty) padded with <pad>
/// to the longest of them.
// rows: B indices -> ids, key_padding_mask: (B, T), T = the longest chosen sequence
PaddedIds pad_sequences(const std::vector<std::vector<int64_t>>& sequences, std::span<const int64_t> rows);

struct EncodedExamples {
  std::vector<std::vector<int64_t>> sequences;  // encode_text of each example's text
  std::vector<int64_t> targets;                 // the index of each example's label in the label list
  int64_t truncated = 0;                        // sequences cut to the context length
};

/// encode_text for every example, and its label's index (a label missing from labels is a ValueError
/// naming it).
EncodedExamples encode_examples(const std::vector<Example>& examples, const Vocab& vocab,
                                const std::vector<std::string>& labels, int64_t context_length, bool prepend_cls);

/// Encodes, truncates and pads the examples into one batch; T = the longest sequence after truncation
/// (<= context_length, the <cls> counted). An empty example list, context_length < 1 (< 2 with <cls>) or a
/// label missing from labels is a ValueError naming it.
// examples: B texts -> ids, mask: (B, T), targets: (B)
Batch make_batch(const std::vector<Example>& examples, const Vocab& vocab, const std::vector<std::string>& labels,
                 int64_t context_length, bool prepend_cls);

}  // namespace tapegrad
