#include "train/training_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "autograd/error.h"
#include "train/data/vocab.h"

namespace tapegrad {

namespace {

constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

/// bytes as "12.3 GiB", or "45 MiB" below a GiB.
std::string gib(double bytes) {
  char text[64];
  if (bytes >= GiB) std::snprintf(text, sizeof text, "%.1f GiB", bytes / GiB);
  else std::snprintf(text, sizeof text, "%.0f MiB", bytes / (1024.0 * 1024.0));
  return text;
}

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

// Float32 weights, gradients and two Adam moments (16 bytes a parameter), and what a step keeps for
// backward: per layer about 16 floats per position and model dimension (attention's inputs and outputs,
// layer norms, residuals), 3 per position and feed-forward dimension, and the (B, H, T, T) attention
// weights twice. It errs high: 641 MiB for the medium model of docs/performance.md, whose training peaks
// at 314 MiB. It is only meant to refuse, before allocating any of it, what cannot fit.
double training_memory_bytes(const TrainOptions& o) {
  const nn::ClassifierOptions& m = o.model;
  const double B = o.batch_size, T = m.context_length, C = m.d_model, F = m.d_ff, H = m.n_heads;
  const double per_layer = B * T * (16 * C + 3 * F) + 2 * B * H * T * T;
  return 16 * static_cast<double>(nn::parameter_count(m)) + 4 * (m.n_layers * per_layer + 4 * B * T * C);
}

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
    const double bytes = static_cast<double>(as.rlim_cur);
    consider(bytes, cat("the ", gib(bytes), " of address space this process may use (ulimit -v)"));
  }
  // cgroup v2, then v1; "max" or a huge number means no limit, which the machine's memory undercuts.
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream file(path);
    double bytes = 0;
    if (file >> bytes) consider(bytes, cat("the ", gib(bytes), " of memory this container may use (", path, ")"));
  }
  return limit;
}

void check_memory(const TrainOptions& o, const std::string& lower) {
  const double needed = training_memory_bytes(o);
  const MemoryLimit machine = memory_limit();
  if (machine.bytes > 0 && needed > machine.bytes) {
    char line[400];
    std::snprintf(line, sizeof line,
                  "this model needs about %.1f GiB to train (%.3g parameters, batch %lld x context %lld), more than "
                  "%s; lower %s",
                  needed / GiB, static_cast<double>(nn::parameter_count(o.model)), static_cast<long long>(o.batch_size),
                  static_cast<long long>(o.model.context_length), machine.described.c_str(), lower.c_str());
    throw ValueError(line);
  }
}

void check_memory_before_data(const TrainOptions& o, const OptionNames& name) {
  const MemoryLimit machine = memory_limit();
  if (machine.bytes <= 0 || !o.data.empty()) return;  // data files: checked once read, within the readers' size limits
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
  const std::string context = o.context_length > 0 ? name("context_length")
                                                    : cat(name("context_length"), " (or ", name("task.max_len"), ")");
  check_memory(task_model, cat(name("batch_size"), ", ", context, ", ", name("model.d_model"), ", ", name("model.d_ff"),
                               ", ", name("model.n_layers"), " or ", name("task.symbols")));
  // The model alone fits, but not with the examples: say both.
  throw ValueError(cat("the task's examples (about ", gib(examples), ") and the model (about ", gib(model),
                       " to train) need more than ", machine.described, "; lower ",
                       name("train_size"), ", ", name("task.max_len"), " or the model's size"));
}

}  // namespace tapegrad
