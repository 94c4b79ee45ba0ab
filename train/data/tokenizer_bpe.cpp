// Tokenizer::learn_bpe: a SentencePiece BPE model learnt from a text (tokenizer.h), apart from the reading and
// use of tokenizers in tokenizer.cpp.
#include <sentencepiece_trainer.h>
#include <utf8.h>

#include <algorithm>
#include <limits>
#include <regex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/error.h"
#include "train/data/sentencepiece_reason.h"
#include "train/data/tokenizer.h"

namespace tapegrad {

namespace {

// SentencePiece's trainer drops a training line that holds U+2585 ('▅'), its sign for an unknown character.
constexpr std::string_view kUnknownSign = "\u2585";

/// The training text as SentencePiece's trainer takes it: one sentence at a time, each a line with its
/// '\n' kept, so that newlines are characters of the vocabulary like any other (a piece may end with one,
/// "." + "\n"; none holds one inside, since no sentence does). A line is also cut at each U+2585, which
/// the trainer would drop the whole line for: the rest of the line still counts.
class TrainingSentences : public sentencepiece::SentenceIterator {
 public:
  explicit TrainingSentences(std::string_view text) {
    for (size_t start = 0; start < text.size();) {
      const size_t newline = text.find('\n', start);
      const size_t end = newline == std::string_view::npos ? text.size() : newline + 1;
      const std::string_view line = text.substr(start, end - start);
      for (size_t from = 0;;) {
        const size_t sign = line.find(kUnknownSign, from);
        const std::string_view part = line.substr(from, sign == std::string_view::npos ? line.npos : sign - from);
        if (!part.empty()) sentences_.push_back(part);
        if (sign == std::string_view::npos) break;
        from = sign + kUnknownSign.size();
      }
      start = end;
    }
    if (!sentences_.empty()) current_ = sentences_[0];
  }
  size_t longest() const {
    size_t n = 0;
    for (const std::string_view s : sentences_) n = std::max(n, s.size());
    return n;
  }

  bool done() const override { return next_ >= sentences_.size(); }
  void Next() override {
    if (++next_ < sentences_.size()) current_ = sentences_[next_];
  }
  const std::string& value() const override { return current_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::vector<std::string_view> sentences_;  // views of the text: a large corpus is not copied whole
  size_t next_ = 0;
  std::string current_;
};

/// Why SentencePiece's trainer failed, in our words where we know its message: "Vocabulary size too high
/// (100). Please set it to a value <= 94" is the most tokens the text's merges reach.
std::string bpe_training_failure(const sentencepiece::util::Status& status, const std::string& what) {
  const std::string reason = sentencepiece_reason(status, "SentencePiece's trainer failed");
  static const std::regex too_high(R"(Vocabulary size too high \(\d+\)\. Please set it to a value <= (\d+))");
  if (std::smatch m; std::regex_search(reason, m, too_high))
    return cat("more than the ", m[1].str(), " tokens BPE can learn from ", what,
               " (its characters, <unk> and every merge its text has): at most ", m[1].str());
  return cat("learning BPE tokens from ", what, ": ", reason);
}

}  // namespace

Tokenizer Tokenizer::learn_bpe(std::string_view text, int64_t vocab_size, const std::string& what,
                               const std::string& size_name) {
  try {
    check_corpus_text(text, what);
  } catch (const IOError& e) {
    throw ValueError(e.what());
  }
  // BPE starts from every character of the text (character_coverage 1 below) and <unk>, then adds one
  // merged pair a token. SentencePiece writes a space as U+2581 ('▁'), so the two are one character here.
  std::set<char32_t> characters;
  for (auto it = text.begin(); it != text.end();) {
    const char32_t c = utf8::unchecked::next(it);
    characters.insert(c == U' ' ? U'\u2581' : c);
  }
  const auto smallest = static_cast<int64_t>(characters.size()) + 1;
  if (vocab_size < smallest)
    throw ValueError(cat(size_name, " ", vocab_size, " is below the ", characters.size(), " distinct characters of ",
                         what, " + 1 (<unk>): BPE starts from every character, so at least ", smallest));
  // SentencePiece numbers pieces with int.
  if (vocab_size > std::numeric_limits<int>::max())
    throw ValueError(
        cat(size_name, " ", vocab_size, " is above SentencePiece's largest, ", std::numeric_limits<int>::max()));

  TrainingSentences sentences(text);
  constexpr size_t kLongestSentence = size_t{1} << 30;  // SentencePiece's bound on max_sentence_length
  if (sentences.longest() > kLongestSentence)
    throw ValueError(cat(what, ": a line of ", sentences.longest(), " bytes: SentencePiece takes lines of up to ",
                         kLongestSentence));
  // SentencePiece's trainer never makes a tab a piece (it marks a boundary inside the trainer) and drops
  // U+2585 (TrainingSentences): each is a piece of its own, a user-defined symbol, when the text has it.
  std::string symbols;
  for (const std::string_view s : {std::string_view("\t"), kUnknownSign})
    if (text.find(s) != std::string_view::npos) symbols += (symbols.empty() ? "" : ",") + std::string(s);
  const std::unordered_map<std::string, std::string> options = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(vocab_size)},
      // Every character of the text is a token (not only the 99.95% most frequent, SentencePiece's default
      // for large alphabets), so decode(encode(text)) is the text.
      {"character_coverage", "1"},
      // No byte_fallback: its 256 byte tokens would cost as many ids and never occur in the training ids
      // (every character of the text has a token), so the model would never learn them; an unseen
      // character is <unk> here as in the characters kind.
      {"byte_fallback", "false"},
      // The text as it is: no Unicode normalisation (NFKC would turn "ﬁ" into "fi" and a tab into a space),
      // no space added before the text, runs of spaces kept, so that decoding gives the same bytes back.
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "false"},
      {"remove_extra_whitespaces", "false"},
      // A run of spaces (indentation) may be one token, as a word is.
      {"allow_whitespace_only_pieces", "true"},
      {"user_defined_symbols", symbols},
      // <unk> is id 0 as in every tokenizer here, and decodes as "<unk>" as theirs do. No <s>, </s> or
      // <pad>: a language model's windows are cut from one running text, with no sentences to mark.
      {"unk_id", "0"},
      {"unk_surface", kUnkToken},
      {"bos_id", "-1"},
      {"eos_id", "-1"},
      {"pad_id", "-1"},
      // Every line, not a random sample of input_sentence_size of them, and none skipped for its length:
      // a sample would make the model depend on the seed, and a dropped line could lose a character.
      {"input_sentence_size", "0"},
      {"max_sentence_length", std::to_string(std::max<size_t>(sentences.longest(), 10))},
      // One thread: the same text gives the same model on any machine.
      {"num_threads", "1"},
      // Progress and warnings stay quiet (an error comes back as the status, and is ours to report).
      {"minloglevel", "2"},
  };
  std::string model;
  if (const auto status = sentencepiece::SentencePieceTrainer::Train(options, &sentences, &model); !status.ok())
    throw ValueError(cat(size_name, " ", vocab_size, ": ", bpe_training_failure(status, what)));
  return from_sentencepiece_bytes(std::move(model), "the SentencePiece model just learnt");
}

}  // namespace tapegrad
