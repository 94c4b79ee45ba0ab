#include "train/io/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "autograd/error.h"

namespace tapegrad {

namespace {

/// Closes the descriptor on every path out of read_whole_file.
struct Descriptor {
  int fd;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

std::string limit_text(const FileLimit& limit) {
  const uint64_t mib = limit.bytes >> 20;
  return cat("the limit for ", limit.kind, " is ", mib, " MiB (", limit.bytes, " bytes)");
}

}  // namespace

std::string read_whole_file(const std::string& path, const FileLimit& limit) {
  // O_NONBLOCK is not used: opening a FIFO waits for its writer, as `cat` does.
  const Descriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY)};
  if (file.fd < 0) throw IOError(cat(path, ": cannot open: ", std::strerror(errno)));
  struct stat info;
  if (::fstat(file.fd, &info) != 0) throw IOError(cat(path, ": cannot stat: ", std::strerror(errno)));
  if (S_ISDIR(info.st_mode)) throw IOError(cat(path, ": is a directory, not a file"));
  if (S_ISCHR(info.st_mode) || S_ISBLK(info.st_mode))
    throw IOError(cat(path, ": is a device, not a file (tapegrad reads regular files and pipes)"));
  if (!S_ISREG(info.st_mode) && !S_ISFIFO(info.st_mode))
    throw IOError(cat(path, ": is neither a regular file nor a pipe"));
  std::string bytes;
  if (S_ISREG(info.st_mode)) {
    const uint64_t size = static_cast<uint64_t>(info.st_size);
    if (size > limit.bytes) throw IOError(cat(path, ": ", size, " bytes is too large: ", limit_text(limit)));
    bytes.reserve(size);
  }
  char chunk[1 << 16];
  for (;;) {
    const ssize_t got = ::read(file.fd, chunk, sizeof chunk);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw IOError(cat(path, ": read failed after ", bytes.size(), " bytes: ", std::strerror(errno)));
    }
    if (got == 0) break;
    // A pipe has no size to check in advance, and a regular file may grow while it is read.
    if (bytes.size() + static_cast<uint64_t>(got) > limit.bytes)
      throw IOError(cat(path, ": more than ", limit.bytes, " bytes: ", limit_text(limit)));
    bytes.append(chunk, static_cast<size_t>(got));
  }
  return bytes;
}

}  // namespace tapegrad
