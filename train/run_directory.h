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

/// Whether dir holds a run that tapegrad made: a `latest` link, `.checkpoints/` or trainer.json.
bool holds_run(const std::string& dir);

}  // namespace tapegrad
