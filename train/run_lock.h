#pragma once
// One trainer per run directory: `train --out` and `train --resume` hold an exclusive flock(2) on
// <dir>/.lock for as long as they run. The kernel drops the lock when the process ends, however it ends,
// so a run killed with SIGKILL never blocks its own --resume.
//
// Taking the lock is also where a trainer first touches the run directory, so it refuses, before it
// creates anything, a directory from elsewhere whose .lock or .checkpoints is a symbolic link (or not the
// file or folder tapegrad makes there): writing through them would write, and removing old checkpoints
// would remove, outside the run directory.
#include <string>

namespace tapegrad {

class RunLock {
 public:
  /// Locks dir/.lock (creating dir and the file), and writes this process's id into it for the message
  /// another trainer gets. ValueError "<flag> <dir> is in use by another tapegrad train (pid N)" when the
  /// lock is held; IOError naming the file when it cannot be created (a read-only directory, ...) or when
  /// .lock or .checkpoints is a link or of the wrong kind (see above); the link's target is left alone.
  RunLock(const std::string& dir, const std::string& flag);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace tapegrad
