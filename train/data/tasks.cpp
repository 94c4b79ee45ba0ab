#include "train/data/tasks.h"

#include <algorithm>

#include "autograd/error.h"

namespace tapegrad {

namespace {

std::string symbol(int64_t i) {
  std::string s = "t";  // not "t" + to_string(i): GCC 12 warns falsely (-Wrestrict) on that form
  s += std::to_string(i);
  return s;
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i) out += ' ';
    out += words[i];
  }
  return out;
}

}  // namespace

const std::vector<std::string>& task_names() {
  static const std::vector<std::string> names = {"majority", "order"};
  return names;
}

void validate_task(const TaskOptions& o, const std::function<std::string(std::string_view)>& name) {
  const auto& names = task_names();
  if (std::find(names.begin(), names.end(), o.name) == names.end())
    throw ValueError(cat(name("name"), ": unknown task '", o.name, "' (choose one of: ", join(names), ")"));
  if (o.symbols < 2 || o.symbols > kMaxSymbols)
    throw ValueError(cat(name("symbols"), " ", o.symbols, " is outside [2, ", kMaxSymbols, "] (task ", o.name, ")"));
  if (o.min_len < 1 || o.min_len > o.max_len || o.max_len > kMaxLength)
    throw ValueError(cat("task ", o.name, ": lengths need 1 <= ", name("min_len"), " <= ", name("max_len"), " <= ",
                         kMaxLength, ", got ", name("min_len"), " ", o.min_len, " and ", name("max_len"), " ", o.max_len));
  if (o.name == "order" && o.max_len < 2)
    throw ValueError(cat("task order: ", name("max_len"), " ", o.max_len,
                         " leaves no room for both markers (needs >= 2)"));
}

TaskStream::TaskStream(TaskOptions options, uint64_t seed) : options_(std::move(options)), gen_(seed) {
  validate_task(options_);
}

int64_t TaskStream::draw_length(int64_t min_len) {
  return min_len + static_cast<int64_t>(gen_.below(static_cast<uint64_t>(options_.max_len - min_len + 1)));
}

Example TaskStream::next() { return options_.name == "majority" ? next_majority() : next_order(); }

std::vector<Example> TaskStream::take(int64_t n) {
  if (n < 0) throw ValueError(cat("task stream: cannot take ", n, " examples"));
  std::vector<Example> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.push_back(next());
  return out;
}

Example TaskStream::next_majority() {
  const uint64_t V = static_cast<uint64_t>(options_.symbols);
  // Each try costs O(L), not O(V): with many symbols and short sequences most tries tie (L = 2 draws the
  // same word twice once in V tries), and clearing or scanning all V counts per try made
  // --symbols 65536 --max-len 2 run for hours. The counts are all zero between tries.
  thread_local std::vector<int64_t> counts;
  if (counts.size() < V) counts.resize(V);
  std::vector<int64_t> words;
  while (true) {
    const int64_t L = draw_length(options_.min_len);
    words.resize(static_cast<size_t>(L));
    for (int64_t& w : words) {
      w = static_cast<int64_t>(gen_.below(V));
      ++counts[w];
    }
    int64_t top = words.front();
    bool tied = false;  // another word has top's count
    for (int64_t w : words) {
      if (counts[w] > counts[top]) top = w, tied = false;
      else if (counts[w] == counts[top] && w != top) tied = true;
    }
    for (int64_t w : words) counts[w] = 0;
    if (tied) continue;  // draw again
    std::string text;
    for (size_t i = 0; i < words.size(); ++i) {
      if (i) text += ' ';
      text += symbol(words[i]);
    }
    return {symbol(top), std::move(text)};
  }
}

Example TaskStream::next_order() {
  const int64_t L = draw_length(std::max<int64_t>(options_.min_len, 2));
  const int64_t pos_a = static_cast<int64_t>(gen_.below(static_cast<uint64_t>(L)));
  int64_t pos_b = static_cast<int64_t>(gen_.below(static_cast<uint64_t>(L - 1)));
  if (pos_b >= pos_a) ++pos_b;  // uniform over the L - 1 positions other than A's
  std::string text;
  for (int64_t i = 0; i < L; ++i) {
    if (i) text += ' ';
    if (i == pos_a)
      text += 'A';
    else if (i == pos_b)
      text += 'B';
    else
      text += symbol(static_cast<int64_t>(gen_.below(static_cast<uint64_t>(options_.symbols))));
  }
  return {pos_a < pos_b ? "AB" : "BA", std::move(text)};
}

std::vector<std::string> TaskStream::labels() const {
  if (options_.name == "order") return {"AB", "BA"};
  std::vector<std::string> out;
  for (int64_t i = 0; i < options_.symbols; ++i) out.push_back(symbol(i));
  return out;
}

std::vector<std::string> TaskStream::all_words() const {
  std::vector<std::string> out;
  for (int64_t i = 0; i < options_.symbols; ++i) out.push_back(symbol(i));
  if (options_.name == "order") {
    out.push_back("A");
    out.push_back("B");
  }
  return out;
}

uint64_t validation_seed(uint64_t seed) {
  // Any fixed constant gives a second stream: the generator scrambles its seed through splitmix64.
  // This one is the ASCII of "validate".
  return seed ^ 0x76616c6964617465ULL;
}

std::vector<Example> validation_set(const TaskOptions& options, uint64_t seed, int64_t n) {
  TaskStream stream(options, validation_seed(seed));
  return stream.take(n);
}

}  // namespace tapegrad
