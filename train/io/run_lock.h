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
  /// Locks dir/.lock (creating dir and the file). ValueError "<flag> <dir> is in use by another tapegrad
  /// train (pid N)" when the lock is held; IOError naming the file when it cannot be created (a read-only
  /// directory, ...) or when .lock or .checkpoints is a link, a hard link or of the wrong kind (see above);
  /// the link's target is left alone. The lock file's bytes are not touched: a run refused after locking
  /// leaves the folder as it was.
  RunLock(const std::string& dir, const std::string& flag);
  /// Writes this process's id into the lock file, for the message another trainer gets: once every check
  /// has passed and the run is going to start.
  void announce();
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace tapegrad
