#pragma once
// What a folder is to `tapegrad train`, decided before anything in it is touched: a new or empty folder (free
// to use), a run (resumed, or replaced with --overwrite), a checkpoint inside a run (never written), or a folder
// of somebody's own files (never written: tapegrad would replace files of its names).
#include <string>

namespace tapegrad {

/// Refuses, before the folder is created or locked, an --out that tapegrad must not write into: a checkpoint
/// inside a run (a path through `.checkpoints/`, as `run/best` and `run/latest` are), or a folder that is not
/// empty and holds no run (the root, /dev, a user's folder of config.json and notes). Whether a run already
/// there may be replaced is the trainer's to check under the run's lock (--overwrite).
void check_out_directory(const std::string& out, const std::string& flag);

/// Refuses a --resume of a path that is a checkpoint inside a run (`run/best`), naming the run to resume and the
/// --init that starts a new run from those weights: resuming it would write a run inside the checkpoint.
void check_resume_directory(const std::string& dir);

/// The run whose checkpoint store (`.checkpoints/`) `path` passes through once links are followed
/// (`run/best/x.svg` is in `run/.checkpoints/step-.../`), or "" when it passes through none. Nothing may be
/// written there: a checkpoint is what it was when published, and the next publication removes what is not
/// its own.
std::string run_holding_checkpoint(const std::string& path);

/// Whether dir holds a run that tapegrad made: a `latest` link, `.checkpoints/` or trainer.json.
bool holds_run(const std::string& dir);

}  // namespace tapegrad
