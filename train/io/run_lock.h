#pragma once
// One trainer per run directory: `train --out` and `train --resume` hold an exclusive flock(2) on
// <dir>/.lock for as long as they run. The kernel drops the lock when the process ends, however it ends,
// so a run killed with SIGKILL never blocks its own --resume.
//
// Taking the lock is also where a trainer first touches the run directory, so it refuses, before it
// creates anything, a directory from elsewhere whose .lock or .checkpoints is a symbolic link (or not the
// file or folder tapegrad makes there): writing through them would write, and removing old checkpoints
// would remove, outside the run directory.
//
// A trainer that ends in an error before it wrote anything into the folder (refused after locking, out of
// memory in its first steps) leaves the folder as it found it: the lock file it created is removed, and the
// folders it created with it. A folder that holds anything else of the run keeps its .lock, which marks it
// as tapegrad's (check_out_directory accepts an unfinished run by it).
#include <string>
#include <vector>

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
  /// Releases the lock. Destroyed by an exception's unwinding (any error that ends the run), it also
  /// removes what the constructor created, if the folder holds nothing else (see above).
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  void remove_what_it_created() noexcept;

  int fd_ = -1;
  std::string path_;                  // dir/.lock
  bool created_file_ = false;         // the lock file did not exist before
  std::vector<std::string> created_;  // the folders it made, innermost first
  int exceptions_at_start_ = 0;       // std::uncaught_exceptions() when it was made
};

}  // namespace tapegrad
