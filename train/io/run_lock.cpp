#include "train/io/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "autograd/error.h"
#include "train/io/atomic_file.h"

namespace tapegrad {

namespace {

/// The holder's pid as its lock file says, or "unknown" (it may not have written it yet).
std::string holder_pid(int fd) {
  char text[32] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  std::string pid = n > 0 ? std::string(text, static_cast<size_t>(n)) : "";
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.empty() ? "unknown" : pid;
}

}  // namespace

RunLock::RunLock(const std::string& dir, const std::string& flag) {
  try {
    create_directories_durably(dir);
  } catch (const IOError& e) {
    throw IOError(cat(flag, " ", dir, ": cannot create the directory: ", e.what()));
  }
  const std::string path = dir + "/.lock";
  require_own_entry(path, EntryKind::file);
  require_own_entry(dir + "/.checkpoints", EntryKind::folder);
  // `latest` and `best` are links that a publication swaps by rename: a folder or file there would stop the
  // first publication only after the steps before it were trained, so it is refused now.
  for (const char* link : {"/latest", "/best"}) {
    std::error_code error;
    const auto type = std::filesystem::symlink_status(dir + link, error).type();
    if (type != std::filesystem::file_type::not_found && type != std::filesystem::file_type::symlink)
      throw IOError(cat(dir, link, ": is not a link, where tapegrad keeps a link to a checkpoint: remove it"));
  }
  // O_NOFOLLOW: a link planted after the check above is refused all the same (ELOOP), and O_NONBLOCK keeps
  // a FIFO planted there from blocking the open; fstat below refuses anything but a regular file.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd_ < 0 && errno == ELOOP)
    throw IOError(cat(path, ": is a symbolic link; tapegrad never writes through links in a run folder: remove it"));
  if (fd_ < 0) throw IOError(cat(path, ": cannot open the run's lock file: ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw IOError(cat(path, ": is not a regular file, where tapegrad keeps its lock file: remove it"));
  }
  // A hard link is the same file under another name, perhaps outside the run folder: the pid written below
  // would land there. O_NOFOLLOW cannot see it; the link count can.
  if (st.st_nlink > 1) {
    ::close(fd_);
    fd_ = -1;
    throw IOError(cat(path, ": has ", st.st_nlink, " names (a hard link to a file elsewhere); tapegrad writes its "
                            "pid there only when the lock file is its own: remove it"));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int saved = errno;
    const std::string pid = saved == EWOULDBLOCK ? holder_pid(fd_) : "";
    ::close(fd_);
    fd_ = -1;
    if (saved == EWOULDBLOCK) throw ValueError(cat(flag, " ", dir, " is in use by another tapegrad train (pid ", pid, ")"));
    throw IOError(cat(path, ": cannot lock: ", std::strerror(saved)));
  }
}

void RunLock::announce() {
  const std::string pid = std::to_string(::getpid()) + "\n";
  // Only the message of a refused trainer reads it, so a failed write costs nothing but "pid unknown".
  [[maybe_unused]] const bool written =
      ::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, pid.data(), pid.size(), 0) == static_cast<ssize_t>(pid.size());
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

}  // namespace tapegrad
