#include "train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "autograd/error.h"

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
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw IOError(cat(flag, " ", dir, ": cannot create the directory: ", error.message()));
  const std::string path = dir + "/.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw IOError(cat(path, ": cannot open the run's lock file: ", std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int saved = errno;
    const std::string pid = saved == EWOULDBLOCK ? holder_pid(fd_) : "";
    ::close(fd_);
    fd_ = -1;
    if (saved == EWOULDBLOCK) throw ValueError(cat(flag, " ", dir, " is in use by another tapegrad train (pid ", pid, ")"));
    throw IOError(cat(path, ": cannot lock: ", std::strerror(saved)));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  // Only the message of a refused trainer reads it, so a failed write costs nothing but "pid unknown".
  [[maybe_unused]] const bool written =
      ::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, pid.data(), pid.size(), 0) == static_cast<ssize_t>(pid.size());
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

}  // namespace tapegrad
