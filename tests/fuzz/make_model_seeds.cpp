// Writes the SentencePiece model seeds of tests/fuzz/corpus/tokenizer/ (*.model; make_seeds.py then wraps
// each in a tokenizer.json of its own): small real models, learnt by SentencePiece's trainer from a few lines,
// one of each kind of model its loader builds, and one with a precompiled normalisation table (the
// precompiled_charsmap field, a trie the loader reads as it is), so that the fuzzer starts inside each.
// Not part of the build: it links only libsentencepiece, and is run by hand from the repository's root:
//   g++ -std=c++20 -O1 -o /tmp/make_model_seeds tests/fuzz/make_model_seeds.cpp -lsentencepiece_train \
//       -lsentencepiece && /tmp/make_model_seeds tests/fuzz/corpus/tokenizer
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

const std::vector<std::string> kText = {
    "the cat sat on the mat.\n", "the dog sat on the log.\n", "a cat and a dog met at the gate.\n",
    "\xef\xac\x81ne fish, fine dish.\n",  // "ﬁne": the normalisation table below turns U+FB01 into "fi"
};

class Lines : public sentencepiece::SentenceIterator {
 public:
  bool done() const override { return next_ >= kText.size(); }
  void Next() override { ++next_; }
  const std::string& value() const override { return kText[next_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  size_t next_ = 0;
};

bool learn(const std::string& path, std::unordered_map<std::string, std::string> options) {
  options.insert({{"character_coverage", "1"}, {"minloglevel", "2"}, {"num_threads", "1"},
                  {"bos_id", "-1"}, {"eos_id", "-1"}, {"unk_id", "0"}});
  Lines lines;
  std::string model;
  if (const auto status = sentencepiece::SentencePieceTrainer::Train(options, &lines, &model); !status.ok()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), status.ToString().c_str());
    return false;
  }
  std::ofstream(path, std::ios::binary) << model;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_model_seeds CORPUS_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  // As Tokenizer::learn_bpe learns one: identity normalisation, spaces kept.
  bool ok = learn(dir + "/bpe.model", {{"model_type", "bpe"}, {"vocab_size", "40"},
                                       {"normalization_rule_name", "identity"}, {"add_dummy_prefix", "false"},
                                       {"remove_extra_whitespaces", "false"}, {"allow_whitespace_only_pieces", "true"},
                                       {"unk_surface", "<unk>"}});
  // A unigram model with a two-rule normalisation table: "ﬁ" -> "fi", "." -> " .".
  const std::string rules = "/tmp/make_model_seeds_rules.tsv";
  std::ofstream(rules) << "FB01\t66 69\n2E\t20 2E\n";
  ok = learn(dir + "/unigram_charsmap.model",
             {{"model_type", "unigram"}, {"vocab_size", "40"}, {"normalization_rule_tsv", rules},
              {"hard_vocab_limit", "false"}}) && ok;
  ok = learn(dir + "/char.model", {{"model_type", "char"}, {"normalization_rule_name", "identity"}}) && ok;
  ok = learn(dir + "/word.model", {{"model_type", "word"}, {"vocab_size", "20"},
                                    {"normalization_rule_name", "identity"}, {"hard_vocab_limit", "false"}}) && ok;
  std::remove(rules.c_str());
  return ok ? 0 : 1;
}
