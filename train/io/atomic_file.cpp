#include "train/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "autograd/error.h"

namespace tapegrad {

namespace {

std::string parent_of(const std::string& path) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  return folder.empty() ? "." : folder.string();
}

/// What a directory entry is, for messages: "a symbolic link", "a FIFO", ...
const char* kind_of(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "a device";
}

}  // namespace

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IOError(cat(path, ": cannot open to sync: ", std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) throw IOError(cat(path, ": fsync failed: ", std::strerror(saved)));
}

void require_own_entry(const std::string& path, EntryKind expected) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // absent: tapegrad creates it
  if (S_ISLNK(st.st_mode))
    throw IOError(cat(path, ": is a symbolic link; tapegrad never writes through links in a run folder: remove it"));
  const bool fits = expected == EntryKind::file ? S_ISREG(st.st_mode) : S_ISDIR(st.st_mode);
  if (!fits)
    throw IOError(cat(path, ": is ", kind_of(st.st_mode), ", where tapegrad keeps ",
                      expected == EntryKind::file ? "a regular file" : "a folder", ": remove it"));
}

bool create_directories_durably(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {  // stat, not lstat: a --out the user links elsewhere is theirs
    if (S_ISDIR(st.st_mode)) return false;
    throw IOError(cat(path, ": is ", kind_of(st.st_mode), ", not a folder"));
  }
  const std::string parent = parent_of(path);
  if (parent != path && std::filesystem::path(path).has_relative_path()) create_directories_durably(parent);
  if (::mkdir(path.c_str(), 0755) != 0) {
    if (errno == EEXIST && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return false;  // made meanwhile
    throw IOError(cat(path, ": cannot create the folder: ", std::strerror(errno)));
  }
  fsync_path(parent);  // the new entry reaches the disk before anything inside it is relied on
  return true;
}

void write_file_atomic(const std::string& path, std::span<const std::string_view> pieces) {
  const std::string tmp = path + ".tmp";
  // A .tmp left by a killed write -- or planted as a link to someone's file -- is unlinked (a link goes,
  // not its target) and the .tmp created afresh: O_EXCL fails rather than reuse what another hand made,
  // and O_NOFOLLOW refuses a link put there in between.
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT)
    throw IOError(cat(tmp, ": cannot remove the leftover: ", std::strerror(errno)));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw IOError(cat(tmp, ": cannot create: ", std::strerror(errno)));
  const auto fail = [&](const char* what) {
    const int saved = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return IOError(cat(tmp, ": ", what, ": ", std::strerror(saved)));
  };
  for (std::string_view piece : pieces)
    while (!piece.empty()) {  // write() may take part of a piece, or be interrupted by a signal
      const ssize_t written = ::write(fd, piece.data(), piece.size());
      if (written < 0 && errno != EINTR) throw fail("write failed");
      if (written > 0) piece.remove_prefix(static_cast<size_t>(written));
    }
  // The bytes reach the disk before the name does: renamed first, a power cut could leave path naming
  // an empty file (the data of a file never synced may be lost even after its rename is on disk).
  if (::fsync(fd) != 0) throw fail("fsync failed");
  if (::close(fd) != 0) {  // not fail(): the descriptor is gone whatever close returned
    const int saved = errno;
    ::unlink(tmp.c_str());
    throw IOError(cat(tmp, ": close failed: ", std::strerror(saved)));
  }
  // rename(2) replaces the entry at path; a symbolic link there is replaced, its target left alone.
  if (::rename(tmp.c_str(), path.c_str()) != 0) {  // a folder in the way, say
    const int saved = errno;
    ::unlink(tmp.c_str());
    throw IOError(cat(path, ": cannot rename into place (", std::strerror(saved), ")"));
  }
  // The rename is durable only once the folder's entry is on disk.
  fsync_path(parent_of(path));
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  write_file_atomic(path, std::span<const std::string_view>(&bytes, 1));
}

}  // namespace tapegrad
