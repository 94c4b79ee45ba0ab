#include "train/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "autograd/error.h"

namespace tapegrad {

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IOError(cat(path, ": cannot open to sync: ", std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) throw IOError(cat(path, ": fsync failed: ", std::strerror(saved)));
}

void write_file_atomic(const std::string& path, std::span<const std::string_view> pieces) {
  const std::string tmp = path + ".tmp";
  // An existing .tmp is a leftover of a killed write: O_TRUNC reuses it. If open fails, nothing was
  // created, so there is nothing to remove.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
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
  if (::fsync(fd) != 0) throw fail("fsync failed");
  if (::close(fd) != 0) {  // not fail(): the descriptor is gone whatever close returned
    const int saved = errno;
    ::unlink(tmp.c_str());
    throw IOError(cat(tmp, ": close failed: ", std::strerror(saved)));
  }
  std::error_code error;
  std::filesystem::rename(tmp, path, error);
  if (error) {  // a folder in the way, say
    ::unlink(tmp.c_str());
    throw IOError(cat(path, ": cannot rename into place (", error.message(), ")"));
  }
  // The rename is durable only once the folder's entry is on disk.
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  fsync_path(folder.empty() ? "." : folder.string());
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  write_file_atomic(path, std::span<const std::string_view>(&bytes, 1));
}

}  // namespace tapegrad
