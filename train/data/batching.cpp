#include "train/data/batching.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "autograd/error.h"

namespace tapegrad {

std::vector<int64_t> encode_text(const std::string& text, const Vocab& vocab, int64_t context_length,
                                 bool prepend_cls, bool* truncated) {
  const int64_t min_context = prepend_cls ? 2 : 1;  // room for <cls> and at least one word
  if (context_length < min_context)
    throw ValueError(cat("make_batch: context_length = ", context_length, " is below ", min_context,
                         prepend_cls ? " (the <cls> token takes one position)" : ""));
  std::vector<int64_t> seq;
  if (prepend_cls) seq.push_back(Vocab::kCls);
  const std::vector<int64_t> words = vocab.encode(text);
  if (words.empty())
    seq.push_back(Vocab::kUnk);
  else
    seq.insert(seq.end(), words.begin(), words.end());
  const bool cut = static_cast<int64_t>(seq.size()) > context_length;
  if (cut) seq.resize(static_cast<size_t>(context_length));
  if (truncated) *truncated = cut;
  return seq;
}

PaddedIds pad_sequences(const std::vector<std::vector<int64_t>>& sequences, std::span<const int64_t> rows) {
  const int64_t B = static_cast<int64_t>(rows.size());
  int64_t T = 0;
  for (int64_t row : rows) T = std::max<int64_t>(T, static_cast<int64_t>(sequences[row].size()));
  std::vector<int64_t> ids(static_cast<size_t>(B * T), Vocab::kPad);
  std::vector<int> pad(static_cast<size_t>(B * T), 1);
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int64_t>& seq = sequences[rows[b]];
    std::copy(seq.begin(), seq.end(), ids.begin() + b * T);
    std::fill_n(pad.begin() + b * T, seq.size(), 0);
  }
  return {tapegrad::ids(ids, Shape{B, T}), mask(pad, Shape{B, T})};
}

EncodedExamples encode_examples(const std::vector<Example>& examples, const Vocab& vocab,
                                const std::vector<std::string>& labels, int64_t context_length, bool prepend_cls) {
  std::unordered_map<std::string, int64_t> class_of;
  for (size_t i = 0; i < labels.size(); ++i) class_of.emplace(labels[i], static_cast<int64_t>(i));
  EncodedExamples encoded;
  encoded.sequences.reserve(examples.size());
  encoded.targets.reserve(examples.size());
  for (const Example& example : examples) {
    const auto cls = class_of.find(example.label);
    if (cls == class_of.end())
      throw ValueError(cat("make_batch: label '", example.label, "' is not one of the ", labels.size(), " labels"));
    encoded.targets.push_back(cls->second);
    bool truncated = false;
    encoded.sequences.push_back(encode_text(example.text, vocab, context_length, prepend_cls, &truncated));
    encoded.truncated += truncated;
  }
  return encoded;
}

Batch make_batch(const std::vector<Example>& examples, const Vocab& vocab, const std::vector<std::string>& labels,
                 int64_t context_length, bool prepend_cls) {
  if (examples.empty()) throw ValueError("make_batch: no examples");
  const EncodedExamples encoded = encode_examples(examples, vocab, labels, context_length, prepend_cls);
  std::vector<int64_t> rows(examples.size());
  std::iota(rows.begin(), rows.end(), 0);
  PaddedIds padded = pad_sequences(encoded.sequences, rows);
  Batch batch;
  batch.ids = std::move(padded.ids);
  batch.key_padding_mask = std::move(padded.key_padding_mask);
  batch.targets = tapegrad::ids(encoded.targets, Shape{static_cast<int64_t>(examples.size())});
  batch.truncated = encoded.truncated;
  return batch;
}

}  // namespace tapegrad
