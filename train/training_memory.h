#pragma once
// How much memory a training run needs, estimated from its options alone, so that a run that cannot fit is
// refused before any of it is allocated: the model and its training step, and the built-in task's examples.
#include <string>

#include "train/train_options.h"

namespace tapegrad {

/// Bytes a training step of these options needs, roughly (the model's vocab_size and context_length
/// filled in); it errs high.
double training_memory_bytes(const TrainOptions& options);

/// Bytes the built-in task's examples take once generated: the fixed training set (train_size examples)
/// and the validation set, each example of up to max_len words; it errs high. 0 with data files, whose
/// size the file readers bound.
double task_examples_bytes(const TrainOptions& options);

/// The memory a run may use: the smallest of the machine's physical memory, the address-space limit
/// (ulimit -v) and the cgroup's limit (a container's memory.max), with how to name it in a message
/// ("this machine's 23.5 GiB of memory", "the 4.0 GiB of address space ulimit -v allows"). bytes is 0
/// when the system says nothing.
struct MemoryLimit {
  double bytes = 0;
  std::string described;
};
MemoryLimit memory_limit();

/// A ValueError saying how much the run would need when that exceeds memory_limit().
/// `lower` lists the flags that shrink it (the command line's or a bench's names).
void check_memory(const TrainOptions& options,
                  const std::string& lower = "--batch-size, --context-length, --d-model, --ff or --layers");

/// The same check before any data exists, from the options alone (validate() runs it): the task's
/// examples, plus, for a built-in task without --init, the model the task implies (its vocabulary,
/// classes and context come from the task's settings). Named by `name`, as validate() names options.
void check_memory_before_data(const TrainOptions& options, const OptionNames& name);

}  // namespace tapegrad
