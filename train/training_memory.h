#pragma once
// How much memory a training run needs, estimated from its options alone, so that a run that cannot fit is
// refused before any of it is allocated: the model and its training step, and the built-in task's examples.
#include <string>
#include <string_view>

#include "train/train_options.h"

namespace tapegrad {

/// What a training run of one model kind needs, part by part (bytes, each erring high), and the words of
/// its refusal. Each kind states its own (training_memory.cpp, one function a kind): the classifier's head
/// is K x C on a pooled row, a language model's V x C at every position, with (B, T, V) logits.
struct TrainingMemory {
  std::string model;        // "classifier", "language model": the refusal's "this <model> needs ..."
  double parameters = 0;    // elements
  double weights = 0;       // float32 weights, their gradients and the optimizer's buffers, for the whole run
  double step = 0;          // what a training step keeps for backward: activations (and a language model's logits)
  double evaluation = 0;    // an evaluation batch without the tape (evaluate.h's budget of B x T tokens)
  double checkpoint = 0;    // the copies a checkpoint makes before writing them (the optimizer's state)
  std::string shape;        // "batch 64 x context 32", "batch 512 x context 256, vocabulary 20001"
  std::string lower;        // the options that shrink it, named as the caller names them
  /// weights plus the largest of the rest: a step, an evaluation and a checkpoint never overlap.
  double bytes() const;
};

/// The memory a run of these options needs (the model's vocab_size and context_length filled in, as
/// fit_model_to_data does), by its kind (is_language_model). `name` names the options in `lower`.
TrainingMemory training_memory(const TrainOptions& options, const OptionNames& name);

/// The flag of `tapegrad train` that sets a field the memory check names ("model.d_ff": "--ff"); the
/// trainer's messages use them. tests/train/test_training_memory.cpp checks them against train's flag table.
std::string train_flag_name(std::string_view field);

/// training_memory(options).bytes().
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

/// A ValueError when training_memory(options) exceeds memory_limit(): "this language model needs about
/// 20.3 GiB to train (1.31e+06 parameters, batch 512 x context 256, vocabulary 20001), more than <limit>;
/// lower ..." with the flags `name` gives (a bench passes its own).
void check_memory(const TrainOptions& options, const OptionNames& name = train_flag_name);

/// The same check before any data exists, from the options alone (validate() runs it): the task's
/// examples, plus, for a built-in task without --init, the model the task implies (its vocabulary,
/// classes and context come from the task's settings). Named by `name`, as validate() names options.
void check_memory_before_data(const TrainOptions& options, const OptionNames& name);

}  // namespace tapegrad
