#include "train/batching.h"

#include <algorithm>
#include <unordered_map>

#include "autograd/error.h"

namespace tapegrad {

Batch make_batch(const std::vector<Example>& examples, const Vocab& vocab, const std::vector<std::string>& labels,
                 int64_t context_length, bool prepend_cls) {
  if (examples.empty()) throw ValueError("make_batch: no examples");
  const int64_t min_context = prepend_cls ? 2 : 1;  // room for <cls> and at least one word
  if (context_length < min_context)
    throw ValueError(cat("make_batch: context_length = ", context_length, " is below ", min_context,
                         prepend_cls ? " (the <cls> token takes one position)" : ""));
  std::unordered_map<std::string, int64_t> class_of;
  for (size_t i = 0; i < labels.size(); ++i) class_of.emplace(labels[i], static_cast<int64_t>(i));

  const int64_t B = static_cast<int64_t>(examples.size());
  std::vector<std::vector<int64_t>> sequences;
  sequences.reserve(examples.size());
  std::vector<int64_t> targets;
  targets.reserve(examples.size());
  Batch batch;
  int64_t T = 0;
  for (const Example& example : examples) {
    const auto cls = class_of.find(example.label);
    if (cls == class_of.end())
      throw ValueError(cat("make_batch: label '", example.label, "' is not one of the ", labels.size(), " labels"));
    targets.push_back(cls->second);
    std::vector<int64_t> seq;
    if (prepend_cls) seq.push_back(Vocab::kCls);
    const std::vector<int64_t> words = vocab.encode(example.text);
    if (words.empty())
      seq.push_back(Vocab::kUnk);
    else
      seq.insert(seq.end(), words.begin(), words.end());
    if (static_cast<int64_t>(seq.size()) > context_length) {
      seq.resize(static_cast<size_t>(context_length));
      ++batch.truncated;
    }
    T = std::max<int64_t>(T, static_cast<int64_t>(seq.size()));
    sequences.push_back(std::move(seq));
  }

  std::vector<int64_t> ids(static_cast<size_t>(B * T), Vocab::kPad);
  std::vector<int> pad(static_cast<size_t>(B * T), 1);
  for (int64_t b = 0; b < B; ++b)
    for (size_t t = 0; t < sequences[b].size(); ++t) {
      ids[b * T + t] = sequences[b][t];
      pad[b * T + t] = 0;
    }
  batch.ids = tapegrad::ids(ids, Shape{B, T});
  batch.key_padding_mask = mask(pad, Shape{B, T});
  batch.targets = tapegrad::ids(targets, Shape{B});
  return batch;
}

}  // namespace tapegrad
