// The synthetic tasks: deterministic per seed, labels that recount correctly, lengths in range, a
// validation stream distinct from the training stream, and option validation.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "autograd/error.h"
#include "train/data/tasks.h"
#include "train/data/vocab.h"

using namespace tapegrad;

namespace {

std::string error_of(const TaskOptions& options) {
  try {
    TaskStream stream(options, 1);
  } catch (const ValueError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("train: task streams are deterministic per seed") {
  for (const std::string& name : task_registry().names()) {
    INFO(name);
    TaskStream a({name}, 42), b({name}, 42), c({name}, 43);
    const std::vector<Example> xs = a.take(50), ys = b.take(50), zs = c.take(50);
    CHECK(xs == ys);
    CHECK(xs != zs);
  }
}

TEST_CASE("train: majority labels are the unique most frequent word") {
  const TaskOptions options{"majority", 5, 3, 12};
  TaskStream stream(options, 7);
  const std::vector<std::string> labels = stream.labels();
  CHECK(labels == std::vector<std::string>{"t0", "t1", "t2", "t3", "t4"});
  const std::vector<std::string> words = stream.all_words();
  CHECK(words == labels);
  std::set<int64_t> lengths;
  std::set<std::string> seen_labels;
  for (int i = 0; i < 1000; ++i) {
    const Example e = stream.next();
    const std::vector<std::string> tokens = split_words(e.text);
    const int64_t L = static_cast<int64_t>(tokens.size());
    REQUIRE(L >= options.min_len);
    REQUIRE(L <= options.max_len);
    lengths.insert(L);
    std::map<std::string, int> counts;
    for (const std::string& w : tokens) {
      REQUIRE(std::find(words.begin(), words.end(), w) != words.end());
      ++counts[w];
    }
    int top = 0;
    for (const auto& [w, n] : counts) top = std::max(top, n);
    int winners = 0;
    std::string winner;
    for (const auto& [w, n] : counts)
      if (n == top) ++winners, winner = w;
    INFO(e.label << "\t" << e.text);
    REQUIRE(winners == 1);
    REQUIRE(e.label == winner);
    seen_labels.insert(e.label);
  }
  CHECK(lengths.size() == 10);  // every length in [3, 12] occurs
  CHECK(seen_labels.size() == 5);
}

TEST_CASE("train: order labels match the marker positions") {
  const TaskOptions options{"order", 4, 1, 9};
  TaskStream stream(options, 11);
  CHECK(stream.labels() == std::vector<std::string>{"AB", "BA"});
  const std::vector<std::string> words = stream.all_words();
  CHECK(words == std::vector<std::string>{"t0", "t1", "t2", "t3", "A", "B"});
  std::map<std::string, int> label_counts;
  std::set<int64_t> lengths;
  for (int i = 0; i < 1000; ++i) {
    const Example e = stream.next();
    const std::vector<std::string> tokens = split_words(e.text);
    INFO(e.label << "\t" << e.text);
    const int64_t L = static_cast<int64_t>(tokens.size());
    REQUIRE(L >= 2);  // min_len 1 is raised to the two markers
    REQUIRE(L <= options.max_len);
    lengths.insert(L);
    REQUIRE(std::count(tokens.begin(), tokens.end(), "A") == 1);
    REQUIRE(std::count(tokens.begin(), tokens.end(), "B") == 1);
    for (const std::string& w : tokens) REQUIRE(std::find(words.begin(), words.end(), w) != words.end());
    const auto a = std::find(tokens.begin(), tokens.end(), "A");
    const auto b = std::find(tokens.begin(), tokens.end(), "B");
    REQUIRE(e.label == (a < b ? "AB" : "BA"));
    ++label_counts[e.label];
  }
  CHECK(lengths.size() == 8);  // 2..9
  CHECK(label_counts["AB"] > 400);
  CHECK(label_counts["BA"] > 400);
}

TEST_CASE("train: the validation set is a separate fixed stream of the same seed") {
  const TaskOptions options{"majority"};
  const std::vector<Example> valid = validation_set(options, 5);
  CHECK(valid.size() == 2000);
  CHECK(validation_set(options, 5) == valid);
  CHECK(validation_set(options, 6, 2000) != valid);
  CHECK(validation_seed(5) != 5);
  TaskStream train(options, 5);
  const std::vector<Example> first = train.take(2000);
  int same = 0;
  for (size_t i = 0; i < first.size(); ++i) same += first[i] == valid[i];
  CHECK(same < 10);
  CHECK(validation_set(options, 5, 10) == std::vector<Example>(valid.begin(), valid.begin() + 10));
}

TEST_CASE("train: a task stream continues exactly from a saved state") {
  TaskStream stream({"order", 6, 2, 10}, 3);
  stream.take(7);
  const Generator::State state = stream.state();
  const std::vector<Example> expected = stream.take(20);
  TaskStream other({"order", 6, 2, 10}, 999);
  other.set_state(state);
  CHECK(other.take(20) == expected);
}

TEST_CASE("train: invalid task options are ValueErrors") {
  CHECK_THAT(error_of({"parity"}),
             Catch::Contains("parity") && Catch::Contains("majority") && Catch::Contains("order"));
  CHECK_THAT(error_of({"majority", 1}), Catch::Contains("symbols"));
  CHECK_THAT(error_of({"majority", kMaxSymbols + 1}), Catch::Contains("symbols"));
  CHECK_THAT(error_of({"majority", 8, 0, 4}), Catch::Contains("min_len"));
  CHECK_THAT(error_of({"majority", 8, 5, 4}), Catch::Contains("min_len"));
  CHECK_THAT(error_of({"order", 8, 1, 1}), Catch::Contains("max_len"));
  CHECK(error_of({"majority", 2, 1, 1}) == "no error");  // one word is its own majority
  CHECK(error_of({"order", 2, 2, 2}) == "no error");
  TaskStream single({"majority", 3, 1, 1}, 0);
  CHECK(split_words(single.next().text).size() == 1);
  CHECK_THROWS_AS(single.take(-1), ValueError);
}

namespace {

/// The majority stream as first written (all V counts cleared and scanned per try): the draw order is part
/// of the format, so the O(L) version must give exactly these examples.
std::vector<Example> majority_reference(const TaskOptions& o, uint64_t seed, int64_t n) {
  Generator gen(seed);
  const uint64_t V = static_cast<uint64_t>(o.symbols);
  std::vector<Example> out;
  while (static_cast<int64_t>(out.size()) < n) {
    const int64_t L = o.min_len + static_cast<int64_t>(gen.below(static_cast<uint64_t>(o.max_len - o.min_len + 1)));
    std::vector<int64_t> counts(V), words(static_cast<size_t>(L));
    for (int64_t& w : words) ++counts[w = static_cast<int64_t>(gen.below(V))];
    const auto top = std::max_element(counts.begin(), counts.end());
    if (std::count(counts.begin(), counts.end(), *top) != 1) continue;
    std::string text, label = "t";  // appended, not "t" + to_string: GCC 12 warns falsely (-Wrestrict)
    for (size_t i = 0; i < words.size(); ++i) {
      text += i ? " t" : "t";
      text += std::to_string(words[i]);
    }
    label += std::to_string(top - counts.begin());
    out.push_back({label, text});
  }
  return out;
}

}  // namespace

TEST_CASE("train: majority draws the same examples as the reference, and many symbols with short texts stay fast") {
  for (const TaskOptions& options : {TaskOptions{"majority", 8, 8, 32}, TaskOptions{"majority", 2, 1, 5},
                                     TaskOptions{"majority", 300, 2, 4}, TaskOptions{"majority", 5, 3, 12}})
    for (uint64_t seed : {0ULL, 7ULL, 18446744073709551615ULL}) {
      INFO("symbols " << options.symbols << " lengths " << options.min_len << ".." << options.max_len << " seed " << seed);
      TaskStream stream(options, seed);
      CHECK(stream.take(300) == majority_reference(options, seed, 300));
    }
  // 65536 symbols, two words: about 65536 tries an example; O(V) tries took hours for a validation set.
  const std::vector<Example> examples = validation_set({"majority", 65536, 2, 2}, 1, 200);
  for (const Example& e : examples) CHECK(e.text == e.label + " " + e.label);
}
