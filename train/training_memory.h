#pragma once
// How much memory a training run needs, estimated from its options alone, so that a model that cannot fit
// is refused before any of it is allocated.
#include "train/train_options.h"

namespace tapegrad {

/// Bytes a training step of these options needs, roughly (the model's vocab_size and context_length
/// filled in); it errs high.
double training_memory_bytes(const TrainOptions& options);

/// A ValueError saying how much the run would need when that exceeds the machine's physical memory.
void check_memory(const TrainOptions& options);

}  // namespace tapegrad
