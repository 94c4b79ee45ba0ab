#include "train/io/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

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

/// dir and its ancestors that do not exist yet, innermost first: what creating dir will make.
std::vector<std::string> missing_folders(const std::string& dir) {
  std::vector<std::string> missing;
  std::error_code error;
  for (std::filesystem::path p = std::filesystem::path(dir).lexically_normal(); !p.empty() && p.has_relative_path();
       p = p.parent_path()) {
    if (p.filename().empty()) continue;  // "a/b/": its last part is empty
    if (std::filesystem::exists(std::filesystem::symlink_status(p, error))) break;
    missing.push_back(p.string());
  }
  return missing;
}

}  // namespace

RunLock::RunLock(const std::string& dir, const std::string& flag)
    : path_(dir + "/.lock"), exceptions_at_start_(std::uncaught_exceptions()) {
  created_ = missing_folders(dir);
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
  struct stat before {};
  created_file_ = ::lstat(path.c_str(), &before) != 0 && errno == ENOENT;
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
  // The holder may have removed the file between our open and its release (an error exit, above): then we
  // lock a file no other trainer finds, and one that opens the path anew would lock another. Refused as in use.
  struct stat now {};
  if (::stat(path.c_str(), &now) != 0 || now.st_ino != st.st_ino || now.st_dev != st.st_dev) {
    ::close(fd_);
    fd_ = -1;
    throw ValueError(cat(flag, " ", dir, " is in use by another tapegrad train (its lock file was just replaced)"));
  }
}

void RunLock::announce() {
  const std::string pid = std::to_string(::getpid()) + "\n";
  // Only the message of a refused trainer reads it, so a failed write costs nothing but "pid unknown".
  [[maybe_unused]] const bool written =
      ::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, pid.data(), pid.size(), 0) == static_cast<ssize_t>(pid.size());
}

RunLock::~RunLock() {
  if (fd_ < 0) return;
  if (std::uncaught_exceptions() > exceptions_at_start_) remove_what_it_created();  // before the lock goes
  ::close(fd_);  // closing the last descriptor releases the lock
}

void RunLock::remove_what_it_created() noexcept {
  if (!created_file_) return;
  const std::string dir = path_.substr(0, path_.size() - std::string("/.lock").size());
  std::error_code error;
  for (std::filesystem::directory_iterator it(dir, error), end; !error && it != end; it.increment(error))
    if (it->path().filename() != ".lock") return;  // the run wrote something: the .lock marks the folder as ours
  if (error || ::unlink(path_.c_str()) != 0) return;
  for (const std::string& folder : created_)
    if (::rmdir(folder.c_str()) != 0) return;  // not empty (somebody else's now): left alone
}

}  // namespace tapegrad
