#pragma once
// The training loop of a run that is set up (train/trainer.cpp builds or restores it): steps, the rows of
// metrics.csv, validations, checkpoints, the early stop at the target, and the stops a signal, a divergence
// or an anomaly make, each saying which checkpoint is intact.
#include <ostream>

#include "train/run_state.h"
#include "train/trainer.h"

namespace tapegrad {

/// Trains run from run.step to run.total_steps (or the target accuracy), publishing a checkpoint at each
/// validation; the log gets the progress. Interrupted after saving the step a SIGINT or SIGTERM stopped at.
TrainSummary run_training_loop(Run& run, std::ostream& log);

}  // namespace tapegrad
