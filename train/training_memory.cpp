#include "train/training_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "optim/optimizer.h"
#include "train/data/vocab.h"
#include "train/run_setup.h"

namespace tapegrad {

namespace {

constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

/// How many (B, T, V) float tensors a language model's training step holds at once: the logits, which
/// cross-entropy saves, and their gradient (measured: tests/train/test_training_memory.cpp).
constexpr double kLogitCopiesInAStep = 2;

/// bytes as "12.3 GiB", or "45 MiB" below a GiB.
std::string gib(double bytes) {
  char text[64];
  if (bytes >= GiB) std::snprintf(text, sizeof text, "%.1f GiB", bytes / GiB);
  else std::snprintf(text, sizeof text, "%.0f MiB", bytes / (1024.0 * 1024.0));
  return text;
}

/// The address space this process has mapped already (/proc/self/statm's first field), 0 where unknown.
double mapped_bytes() {
  std::ifstream statm("/proc/self/statm");
  double pages = 0;
  statm >> pages;
  return pages * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

/// Address space a step maps beside its tensors: malloc's arena for each thread that allocates (64 MiB
/// reserved each), OpenBLAS's work buffer for each of its threads and the threads' stacks: a budget for 2
/// threads, without which ulimit -v was reached first (a words model at 96% of the estimate failed
/// allocating its logits, or hung inside OpenBLAS's allocator).
constexpr double kAddressSpaceReserve = 256.0 * 1024 * 1024;

/// The model a built-in task implies, before any example exists: the task's words and the reserved tokens,
/// one class per symbol (majority) or two (order), and a context of max_len (+ <cls>) unless given.
nn::ClassifierOptions model_of_task(const TrainOptions& o) {
  nn::ClassifierOptions m = o.model;
  const bool order = o.task.name == "order";
  m.vocab_size = Vocab::kReserved + o.task.symbols + (order ? 2 : 0);
  m.num_classes = order ? 2 : o.task.symbols;
  m.context_length = o.context_length > 0 ? o.context_length : o.task.max_len + (nn::prepends_cls(m) ? 1 : 0);
  return m;
}

}  // namespace

namespace {

/// "a, b, c or d", leaving out the empty names (options a caller has no flag for: a bench's task).
std::string or_list(std::vector<std::string> items) {
  std::erase(items, std::string());
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) text += cat(i == 0 ? "" : i + 1 == items.size() ? " or " : ", ", items[i]);
  return text;
}

/// The buffers of a parameter's size the run's optimizer keeps per parameter, as its registration says
/// (Adam's two moments, SGD's momentum); 2 for a name no loaded code registered (refused when it is built).
double optimizer_buffers(const TrainOptions& o) {
  const optim::OptimizerEntry* entry = optim::optimizers().find(o.optimizer);
  return entry ? entry->state_buffers : 2;
}

/// What the encoder's layers keep for backward, in floats, per the classifier's measured rule: per layer
/// about 16 floats per position and model dimension (attention's inputs and outputs, layer norms,
/// residuals), 3 per position and feed-forward dimension, and the (B, H, T, T) attention weights twice;
/// plus the embeddings' 4 per position and dimension. It errs high: 641 MiB for the medium model of
/// docs/performance.md, whose training peaks at 314 MiB. Checkpointed layers (encoder.h) keep only their
/// inputs, and backward recomputes one layer at a time; the check assumes it only where a run surely
/// checkpoints ("on", or "auto" at a long context with the dense block, whose layers leave no auxiliary loss).
double encoder_step_floats(const TrainOptions& o, const nn::ClassifierOptions& m, double B, double T) {
  const double C = m.d_model, F = m.d_ff, H = m.n_heads;
  const double layer = B * T * (16 * C + 3 * F) + 2 * B * H * T * T;
  const bool checkpointed = o.activation_checkpointing == "on" ||
                            checkpoints_activations(o.activation_checkpointing, m.context_length, m.ffn != "dense");
  if (checkpointed && m.n_layers > 0) return m.n_layers * B * T * C + layer + 4 * B * T * C;
  return m.n_layers * layer + 4 * B * T * C;
}

/// An evaluation batch of B x T tokens (evaluate.h's rule) without the tape: one layer's activations at a
/// time, which die when the next layer's output replaces them.
double encoder_evaluation_floats(const nn::ClassifierOptions& m, double B, double T) {
  return B * T * (8.0 * m.d_model + 2.0 * m.d_ff) + 2.0 * B * m.n_heads * T * T;
}

/// The weights' part: float32 weights, their gradients and the optimizer's buffers; and a checkpoint's
/// copies before it writes them (the weights as float32, then the optimizer's state: one at a time).
void weights_of(TrainingMemory& need, const TrainOptions& o, double parameters, double extra_saved) {
  const double buffers = optimizer_buffers(o);
  need.parameters = parameters;
  need.weights = 4 * parameters * (2 + buffers);
  need.checkpoint = 4 * std::max(parameters + extra_saved, parameters * buffers);
}

/// The options a classifier's refusal names: the batch, the context, the sizes (a built-in task's too:
/// its words and classes come from --symbols); with --init only the batch, the model being the checkpoint's.
std::string classifier_lower(const TrainOptions& o, const OptionNames& name) {
  if (!o.init.empty()) return cat(name("batch_size"), " (the model's sizes are ", name("init"), "'s)");
  const bool task = o.data.empty();
  std::vector<std::string> flags = {name("batch_size"), name("context_length"), name("model.d_model"),
                                    name("model.d_ff"), name("model.n_layers")};
  if (task && o.context_length <= 0) flags[1] = cat(name("context_length"), " (or ", name("task.max_len"), ")");
  if (task) flags.push_back(name("task.symbols"));
  return or_list(flags);
}

// The classifier: its head reads one pooled row per sequence, so activations dominate.
TrainingMemory classifier_memory(const TrainOptions& o, const OptionNames& name) {
  const nn::ClassifierOptions& m = o.model;
  const double B = static_cast<double>(o.batch_size), T = static_cast<double>(m.context_length);
  TrainingMemory need;
  need.model = "classifier";
  weights_of(need, o, static_cast<double>(nn::parameter_count(m)), 0);
  need.step = 4 * encoder_step_floats(o, m, B, T);
  need.evaluation = 4 * encoder_evaluation_floats(m, B, T);
  need.shape = cat("batch ", o.batch_size, " x context ", m.context_length);
  need.lower = classifier_lower(o, name);
  return need;
}

/// The options a language model's refusal names: the batch, the context, the sizes, and the vocabulary,
/// which --vocab-size sets for bpe and the text's distinct characters or words set otherwise.
std::string language_model_lower(const TrainOptions& o, const OptionNames& name, int64_t vocab) {
  if (!o.init.empty()) return cat(name("batch_size"), " (the model's sizes are ", name("init"), "'s)");
  std::vector<std::string> flags = {name("batch_size"), name("context_length"), name("model.d_model"),
                                    name("model.d_ff"), name("model.n_layers")};
  if (o.tokenizer == "bpe" && o.tokenizer_model.empty()) {
    flags.insert(flags.begin() + 2, name("vocab_size"));
    return or_list(flags);
  }
  const std::string vocabulary =
      o.tokenizer == "bpe"
          ? cat("a ", name("tokenizer_model"), " of fewer pieces than its ", vocab)
          : cat("the vocabulary: ", name("tokenizer"), " ", o.tokenizer, " takes it from the text (", vocab,
                " tokens, one a distinct ", o.tokenizer == "words" ? "word" : "character", "), ", name("tokenizer"),
                " bpe with ", name("vocab_size"), " N makes N");
  return cat(or_list(flags), ", or ", vocabulary);
}

// The language model: its head is V x C (tied: the embedding's table) and reads every position, so the
// (B, T, V) logits count as much as the layers: the head's output, which cross-entropy saves (its softmax
// is recomputed from it and the rows' log-sum-exp, autograd/ops/loss.cpp), and its gradient, with the
// head's weight gradient as a product beside them. Evaluation keeps one batch's logits.
TrainingMemory language_model_memory(const TrainOptions& o, const OptionNames& name) {
  const nn::LanguageModelOptions lm = language_model_options(o);
  const nn::ClassifierOptions body = nn::body_options(lm);
  const double B = static_cast<double>(o.batch_size), T = static_cast<double>(lm.context_length);
  const double V = static_cast<double>(lm.vocab_size), C = static_cast<double>(lm.d_model);
  TrainingMemory need;
  need.model = "language model";
  weights_of(need, o, static_cast<double>(nn::parameter_count(lm)), lm.tie_embeddings ? V * C : 0);
  need.step = 4 * (encoder_step_floats(o, body, B, T) + kLogitCopiesInAStep * B * T * V + V * C);
  need.evaluation = 4 * (encoder_evaluation_floats(body, B, T) + B * T * V);
  need.shape = cat("batch ", o.batch_size, " x context ", lm.context_length, ", vocabulary ", lm.vocab_size);
  need.lower = language_model_lower(o, name, lm.vocab_size);
  return need;
}

}  // namespace

double TrainingMemory::bytes() const { return weights + std::max({step, evaluation, checkpoint}); }

// The one place that knows every model kind: a new kind adds its function above and its case here.
TrainingMemory training_memory(const TrainOptions& o, const OptionNames& name) {
  return is_language_model(o) ? language_model_memory(o, name) : classifier_memory(o, name);
}

std::string train_flag_name(std::string_view field) {
  static const std::map<std::string_view, std::string_view> flags = {
      {"batch_size", "--batch-size"},   {"context_length", "--context-length"}, {"model.d_model", "--d-model"},
      {"model.d_ff", "--ff"},           {"model.n_layers", "--layers"},         {"vocab_size", "--vocab-size"},
      {"tokenizer", "--tokenizer"},     {"tokenizer_model", "--tokenizer-model"}, {"init", "--init"},
      {"task.max_len", "--max-len"},    {"task.symbols", "--symbols"}};
  const auto found = flags.find(field);
  return found != flags.end() ? std::string(found->second) : option_field_name(field);
}

double training_memory_bytes(const TrainOptions& o) { return training_memory(o, train_flag_name).bytes(); }

// An example is a label and a text (two std::string, 64 bytes), the text's heap block (malloc's 16-byte
// header rounded up to 32) of up to max_len words of "t" + the digits of symbols - 1 and a space, and
// the training stream's 8-byte index of it in the shuffled order.
double task_examples_bytes(const TrainOptions& o) {
  if (!o.data.empty()) return 0;
  const double word = 2.0 + static_cast<double>(std::to_string(std::max<int64_t>(o.task.symbols - 1, 0)).size());
  const double example = 64 + 8 + 32 + static_cast<double>(o.task.max_len) * word;
  return example * (static_cast<double>(o.train_size) + static_cast<double>(o.valid_size));
}

MemoryLimit memory_limit() {
  MemoryLimit limit;
  const auto consider = [&limit](double bytes, const std::string& described) {
    if (bytes > 0 && (limit.bytes == 0 || bytes < limit.bytes)) limit = {bytes, described};
  };
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) {
    const double bytes = static_cast<double>(pages) * static_cast<double>(page);
    consider(bytes, cat("this machine's ", gib(bytes), " of memory"));
  }
  if (rlimit as{}; ::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    // ulimit -v counts every mapping: the program and its libraries, and what the threads map later.
    const double bytes = static_cast<double>(as.rlim_cur), mapped = mapped_bytes();
    const double left = bytes - mapped - kAddressSpaceReserve;
    consider(std::max(left, 1.0), cat("the ", gib(std::max(left, 0.0)), " of address space left (ulimit -v ", gib(bytes),
                                      ", of which ", gib(mapped), " is mapped and ", gib(kAddressSpaceReserve),
                                      " kept for threads)"));
  }
  // cgroup v2, then v1; "max" or a huge number means no limit, which the machine's memory undercuts.
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream file(path);
    double bytes = 0;
    if (file >> bytes) consider(bytes, cat("the ", gib(bytes), " of memory this container may use (", path, ")"));
  }
  return limit;
}

void check_memory(const TrainOptions& o, const OptionNames& name) {
  const TrainingMemory need = training_memory(o, name);
  const MemoryLimit machine = memory_limit();
  if (machine.bytes > 0 && need.bytes() > machine.bytes) {
    char parameters[32];
    std::snprintf(parameters, sizeof parameters, "%.3g", need.parameters);
    throw ValueError(cat("this ", need.model, " needs about ", gib(need.bytes()), " to train (", parameters,
                         " parameters, ", need.shape, "), more than ", machine.described, "; lower ", need.lower));
  }
}

void check_memory_before_data(const TrainOptions& o, const OptionNames& name) {
  const MemoryLimit machine = memory_limit();
  if (machine.bytes <= 0) return;
  // A language model learning bpe knows its vocabulary now: refused before the text is read and learnt.
  if (is_language_model(o) && o.init.empty() && o.tokenizer == "bpe" && o.tokenizer_model.empty()) {
    TrainOptions with_vocabulary = o;
    with_vocabulary.model.vocab_size = o.vocab_size;
    return check_memory(with_vocabulary, name);
  }
  if (!o.data.empty()) return;  // data files: checked once read, within the readers' size limits
  const double examples = task_examples_bytes(o);
  double model = 0;
  TrainOptions task_model = o;
  if (o.init.empty()) {  // with --init the model is the checkpoint's, checked once loaded
    task_model.model = model_of_task(o);
    try {
      model = training_memory_bytes(task_model);
    } catch (const ValueError&) {
      // A model nn refuses (nn::validate) is refused, with nn's message, when it is built.
    }
  }
  if (examples + model <= machine.bytes) return;
  if (examples >= model)
    throw ValueError(cat("the task's examples need about ", gib(examples), " (", o.train_size, " training and ",
                         o.valid_size, " validation examples of up to ", o.task.max_len, " words)",
                         model > 0 ? cat(", the model ", gib(model), " to train") : "", ": more than ",
                         machine.described, "; lower ", name("train_size"), ", ", name("valid_size"), " or ",
                         name("task.max_len")));
  check_memory(task_model, name);  // the classifier's own words: a task's --max-len and --symbols too
  // The model alone fits, but not with the examples: say both.
  throw ValueError(cat("the task's examples (about ", gib(examples), ") and the model (about ", gib(model),
                       " to train) need more than ", machine.described, "; lower ",
                       name("train_size"), ", ", name("task.max_len"), " or the model's size"));
}

}  // namespace tapegrad
