#include "train/data/tasks.h"

#include <algorithm>

#include "autograd/error.h"

namespace tapegrad {

namespace {

NamedRegistry<TaskEntry>& registry() {
  static NamedRegistry<TaskEntry> all("task", "register_task");
  return all;
}

std::vector<std::string> symbol_words(const TaskOptions& o) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < o.symbols; ++i) out.push_back(symbol_word(i));
  return out;
}

Example next_majority(const TaskOptions& o, Generator& gen) {
  const uint64_t V = static_cast<uint64_t>(o.symbols);
  // Each try costs O(L), not O(V): with many symbols and short sequences most tries tie (L = 2 draws the
  // same word twice once in V tries), and clearing or scanning all V counts per try made
  // --symbols 65536 --max-len 2 run for hours. The counts are all zero between tries.
  thread_local std::vector<int64_t> counts;
  if (counts.size() < V) counts.resize(V);
  std::vector<int64_t> words;
  while (true) {
    const int64_t L = draw_length(gen, o.min_len, o.max_len);
    words.resize(static_cast<size_t>(L));
    for (int64_t& w : words) {
      w = static_cast<int64_t>(gen.below(V));
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
      text += symbol_word(words[i]);
    }
    return {symbol_word(top), std::move(text)};
  }
}

Example next_order(const TaskOptions& o, Generator& gen) {
  const int64_t L = draw_length(gen, std::max<int64_t>(o.min_len, 2), o.max_len);
  const int64_t pos_a = static_cast<int64_t>(gen.below(static_cast<uint64_t>(L)));
  int64_t pos_b = static_cast<int64_t>(gen.below(static_cast<uint64_t>(L - 1)));
  if (pos_b >= pos_a) ++pos_b;  // uniform over the L - 1 positions other than A's
  std::string text;
  for (int64_t i = 0; i < L; ++i) {
    if (i) text += ' ';
    if (i == pos_a)
      text += 'A';
    else if (i == pos_b)
      text += 'B';
    else
      text += symbol_word(static_cast<int64_t>(gen.below(static_cast<uint64_t>(o.symbols))));
  }
  return {pos_a < pos_b ? "AB" : "BA", std::move(text)};
}

// One initialiser runs every registration of this file when the library loads.
const bool registered = [] {
  register_task({.name = "majority",
                 .help = "the most frequent of the words t0..t{V-1} (ties drawn again); V classes",
                 .next = next_majority,
                 .labels = symbol_words,
                 .words = symbol_words});
  register_task({.name = "order",
                 .help = "whether marker A comes before marker B among filler words; classes AB and BA",
                 .next = next_order,
                 .labels = [](const TaskOptions&) { return std::vector<std::string>{"AB", "BA"}; },
                 .words =
                     [](const TaskOptions& o) {
                       std::vector<std::string> out = symbol_words(o);
                       out.push_back("A");
                       out.push_back("B");
                       return out;
                     },
                 .validate =
                     [](const TaskOptions& o, const TaskFieldNames& name) {
                       if (o.max_len < 2)
                         throw ValueError(cat("task order: ", name("max_len"), " ", o.max_len,
                                              " leaves no room for both markers (needs >= 2)"));
                     }});
  return true;
}();

}  // namespace

bool register_task(TaskEntry entry) {
  if (!entry.name.empty() && !(entry.next && entry.labels && entry.words))
    throw ValueError(cat("register_task: task '", entry.name, "' lacks next, labels or words"));
  return registry().add(std::move(entry));
}

const NamedRegistry<TaskEntry>& task_registry() { return registry(); }

std::string symbol_word(int64_t i) {
  std::string s = "t";  // not "t" + to_string(i): GCC 12 warns falsely (-Wrestrict) on that form
  s += std::to_string(i);
  return s;
}

int64_t draw_length(Generator& gen, int64_t min_len, int64_t max_len) {
  return min_len + static_cast<int64_t>(gen.below(static_cast<uint64_t>(max_len - min_len + 1)));
}

void validate_task(const TaskOptions& o, const TaskFieldNames& name) {
  const TaskEntry* task = task_registry().find(o.name);
  if (!task) throw ValueError(cat(name("name"), ": ", task_registry().unknown(o.name)));
  if (o.symbols < 2 || o.symbols > kMaxSymbols)
    throw ValueError(cat(name("symbols"), " ", o.symbols, " is outside [2, ", kMaxSymbols, "] (task ", o.name, ")"));
  if (o.min_len < 1 || o.min_len > o.max_len || o.max_len > kMaxLength)
    throw ValueError(cat("task ", o.name, ": lengths need 1 <= ", name("min_len"), " <= ", name("max_len"), " <= ",
                         kMaxLength, ", got ", name("min_len"), " ", o.min_len, " and ", name("max_len"), " ", o.max_len));
  if (task->validate) task->validate(o, name);
}

TaskStream::TaskStream(TaskOptions options, uint64_t seed) : options_(std::move(options)), gen_(seed) {
  validate_task(options_);
  task_ = &task_registry().at(options_.name);
}

Example TaskStream::next() { return task_->next(options_, gen_); }

std::vector<Example> TaskStream::take(int64_t n) {
  if (n < 0) throw ValueError(cat("task stream: cannot take ", n, " examples"));
  std::vector<Example> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.push_back(next());
  return out;
}

std::vector<std::string> TaskStream::labels() const { return task_->labels(options_); }

std::vector<std::string> TaskStream::all_words() const { return task_->words(options_); }

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
