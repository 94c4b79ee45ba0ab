// power_cut: an LD_PRELOAD library that simulates a power cut in the middle of a process's file writes, so
// that a test can check what a run directory looks like after the machine died at any chosen moment.
//
// What a real file system may lose at a power cut (POSIX, and Linux's ext4/xfs/btrfs in practice):
//   - file data written since the file's last fsync/fdatasync: it may be missing (ext4's delayed
//     allocation writes it up to 30 s later), so a file can come back shorter, or as long but zero-filled;
//   - directory changes (a create, rename, link, symlink, unlink, mkdir, rmdir) since the last fsync of
//     the directory: each may or may not have reached the disk. The journal commits them in order (ext4
//     commits every 5 s, whether or not anyone asked), so what survives is some prefix of them, and that
//     prefix may be long while the data of the files they name is still lost: the classic "renamed into
//     place but empty" file of a writer that renames without fsyncing first.
// What this models, at the crash point:
//   - data: every file with bytes changed since its last fsync gets its last synced length back, and
//     every byte changed since then reads as zero (zero length for a file never synced): the worst case;
//   - directory changes not yet made durable (a change is durable once every directory it touched was
//     fsynced after it) are undone in reverse order, except the oldest TAPEGRAD_POWER_CUT_KEEP_METADATA
//     of them (0 by default; "all" keeps every one): the two ends of "some prefix survived", and any
//     prefix between. A change inside a folder whose removal is durable went with the folder. Undoing a rename puts the entry back and restores what it replaced, from a hard link
//     taken before the rename; an unlink is undone from a hard link taken before it; a created entry is
//     removed; a removed folder is made again.
// It then ends the process with _exit(86), as a dead machine does: no destructor, no atexit, no flush.
// The power never really goes out, so an fsync under the root is recorded, not passed to the kernel: the
// model decides what survives, and a test of a hundred cuts does not wait for a disk thousands of times.
// What it does not model: a torn write inside a synced range (sector atomicity), a rename of a folder or
// across the tracked tree's boundary, writes through stdio's fopen (glibc opens those internally, out of
// reach): each of these aborts with a message rather than pass silently as durable. A file system that
// lies about fsync is out of scope (nothing a program does helps there).
//
// Only paths under TAPEGRAD_POWER_CUT_ROOT (a test's temporary folder) are tracked; everything else passes
// through untouched. Settings, all environment variables:
//   TAPEGRAD_POWER_CUT_ROOT            the tracked folder (unset: the library does nothing)
//   TAPEGRAD_POWER_CUT_AT=N            the power goes out at the Nth file-changing call under the root,
//                                      before it runs (unset or 0: never; the run is only counted)
//   TAPEGRAD_POWER_CUT_LOG=path        one line per file-changing call, "N op path", and a last line
//                                      "cut at N" when the power went out (outside the root)
//   TAPEGRAD_POWER_CUT_KEEP_METADATA   see above
//   TAPEGRAD_POWER_CUT_IGNORE_FSYNC=1  fsync and fdatasync succeed without doing or recording anything: a
//                                      writer that never syncs, to show that the model bites
// File-changing calls: open/openat/creat with a write flag, write, writev, pwrite, ftruncate, fsync,
// fdatasync (of a file or a folder under the root), close of a descriptor opened for writing, rename,
// renameat(2), link(at), symlink(at), unlink(at), remove, mkdir(at), rmdir. The hard links it keeps live
// in <root>/.power-cut-keep, which is not tracked.
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr int kCutExitCode = 86;

template <class F>
F next(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}
#define REAL(fn) static const auto real_##fn = next<decltype(&::fn)>(#fn)

// The harness's own file calls (the log, hard links, undoing) pass through untracked.
thread_local int inside = 0;
struct Inside {
  Inside() { ++inside; }
  ~Inside() { --inside; }
};

std::recursive_mutex lock;

struct FileData {       // one tracked inode
  int keep_fd = -1;     // a descriptor kept open for writing: the inode can be cut whatever its names
  off_t synced = 0;     // its length at its last fsync (a file that existed before: its length then)
  std::vector<std::pair<off_t, off_t>> changed;  // byte ranges [begin, end) changed since then
  std::string path;
};

enum class Change { created, made_folder, renamed, removed, removed_folder };
struct DirChange {
  Change kind;
  std::string path, to, kept;  // renamed: path -> to; kept: hard link of what was replaced or removed
  mode_t mode = 0;
  std::set<std::string> folders;  // not yet fsynced since the change
};

struct State {
  bool active = false;
  std::string root, keep_dir, log_path;
  long long cut_at = 0, calls = 0;
  size_t keep_metadata = 0;
  bool ignore_fsync = false;
  long long kept_count = 0;
  std::map<std::pair<dev_t, ino_t>, FileData> files;
  std::map<int, std::pair<dev_t, ino_t>> writers;  // descriptor opened for writing -> inode
  std::vector<DirChange> pending;
};

State& state() {
  static State* s = [] {
    Inside guard;
    auto* s = new State;  // never destroyed: calls may come during exit
    const char* root = ::getenv("TAPEGRAD_POWER_CUT_ROOT");
    char resolved[PATH_MAX];
    if (!root || !*root || !::realpath(root, resolved)) return s;
    s->active = true;
    s->root = resolved;
    s->keep_dir = s->root + "/.power-cut-keep";
    if (const char* v = ::getenv("TAPEGRAD_POWER_CUT_AT")) s->cut_at = ::atoll(v);
    if (const char* v = ::getenv("TAPEGRAD_POWER_CUT_LOG")) s->log_path = v;
    if (const char* v = ::getenv("TAPEGRAD_POWER_CUT_KEEP_METADATA"))
      s->keep_metadata = std::string(v) == "all" ? SIZE_MAX : static_cast<size_t>(::atoll(v));
    if (const char* v = ::getenv("TAPEGRAD_POWER_CUT_IGNORE_FSYNC")) s->ignore_fsync = std::string(v) == "1";
    return s;
  }();
  return *s;
}

[[noreturn]] void unsupported(const std::string& what) {
  const std::string line = "power_cut: not modelled: " + what + "\n";
  [[maybe_unused]] ssize_t ignored = ::write(2, line.data(), line.size());
  ::abort();
}

void log_line(const std::string& line) {
  State& s = state();
  if (s.log_path.empty()) return;
  Inside guard;
  const int fd = ::open(s.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const std::string text = line + "\n";
  [[maybe_unused]] ssize_t ignored = ::write(fd, text.data(), text.size());
  ::close(fd);
}

std::string fd_path(int fd) {
  char link[64], target[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

/// The absolute path of (dirfd, path) with its folder resolved (the last part is kept as given: it may be
/// a link, or not exist yet); empty when the folder does not exist.
std::string resolve(int dirfd, const char* path) {
  if (!path || !*path) return {};
  std::string full = path;
  if (full[0] != '/') {
    std::string base;
    if (dirfd == AT_FDCWD) {
      char cwd[PATH_MAX];
      if (!::getcwd(cwd, sizeof cwd)) return {};
      base = cwd;
    } else {
      base = fd_path(dirfd);
    }
    full = base + "/" + full;
  }
  while (full.size() > 1 && full.back() == '/') full.pop_back();
  const size_t slash = full.rfind('/');
  const std::string folder = slash == 0 ? "/" : full.substr(0, slash), name = full.substr(slash + 1);
  if (name == "." || name == "..") {
    char resolved[PATH_MAX];
    return ::realpath(full.c_str(), resolved) ? std::string(resolved) : std::string();
  }
  char resolved[PATH_MAX];
  if (!::realpath(folder.c_str(), resolved)) return {};
  return std::string(resolved) + (std::string(resolved) == "/" ? "" : "/") + name;
}

std::string parent(const std::string& path) { return path.substr(0, std::max<size_t>(path.rfind('/'), 1)); }

bool under(const std::string& path, const std::string& folder) {
  return path.size() > folder.size() && path.compare(0, folder.size(), folder) == 0 && path[folder.size()] == '/';
}

bool tracked(const std::string& path) {
  const State& s = state();
  return s.active && !inside && !path.empty() && under(path, s.root) && path != s.keep_dir && !under(path, s.keep_dir);
}

[[noreturn]] void cut();

/// Counts one file-changing call; the power goes out before the cut_at-th one runs.
void call(const char* op, const std::string& path) {
  State& s = state();
  ++s.calls;
  log_line(std::to_string(s.calls) + " " + op + " " + path);
  if (s.calls == s.cut_at) cut();
}

/// A hard link to the entry at path, kept to put it back; empty when there is nothing there.
std::string keep(const std::string& path) {
  State& s = state();
  Inside guard;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  if (S_ISDIR(st.st_mode)) unsupported("replacing or unlinking a folder: " + path);
  ::mkdir(s.keep_dir.c_str(), 0755);
  const std::string kept = s.keep_dir + "/" + std::to_string(::getpid()) + "-" + std::to_string(++s.kept_count);
  if (::linkat(AT_FDCWD, path.c_str(), AT_FDCWD, kept.c_str(), 0) != 0) unsupported("cannot keep a hard link of " + path);
  return kept;
}

void drop(const std::string& kept) {
  if (kept.empty()) return;
  Inside guard;
  ::unlink(kept.c_str());
}

void record(Change kind, const std::string& path, std::initializer_list<std::string> folders,
            const std::string& to = {}, const std::string& kept = {}, mode_t mode = 0) {
  state().pending.push_back(DirChange{kind, path, to, kept, mode, std::set<std::string>(folders)});
}

void folder_synced(const std::string& folder) {
  auto& pending = state().pending;
  for (auto& change : pending) change.folders.erase(folder);
  // Durable once every folder it touched was synced: forgotten, with its kept hard link.
  for (const auto& change : pending)
    if (change.folders.empty()) drop(change.kept);
  std::erase_if(pending, [](const DirChange& change) { return change.folders.empty(); });
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

void changed(int fd, off_t begin, off_t end) {
  auto w = state().writers.find(fd);
  if (w == state().writers.end() || begin >= end) return;
  state().files[w->second].changed.emplace_back(begin, end);
}

off_t size_of(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? st.st_size : 0;
}

/// The loss model, applied to the real files; then the process dies.
[[noreturn]] void cut() {
  State& s = state();
  Inside guard;
  log_line("cut at " + std::to_string(s.calls));
  static const char zeros[4096] = {};
  for (auto& [inode, file] : s.files) {
    if (file.changed.empty() && size_of(file.keep_fd) == file.synced) continue;
    if (::ftruncate(file.keep_fd, file.synced) != 0) unsupported("cannot cut " + file.path);
    for (auto [begin, end] : file.changed)
      for (off_t at = begin; at < std::min(end, file.synced);) {
        const ssize_t n = ::pwrite(file.keep_fd, zeros, static_cast<size_t>(std::min<off_t>(sizeof zeros, std::min(end, file.synced) - at)), at);
        if (n <= 0) unsupported("cannot zero " + file.path);
        at += n;
      }
  }
  const size_t keep = std::min(s.keep_metadata, s.pending.size());
  for (size_t i = s.pending.size(); i-- > keep;) {
    const DirChange& c = s.pending[i];
    // A change inside a folder whose own removal is durable went with the folder: nothing to undo.
    if (!exists(parent(c.path)) || (c.kind == Change::renamed && !exists(parent(c.to)))) continue;
    std::error_code error;
    bool ok = true;
    switch (c.kind) {
      case Change::created:
      case Change::made_folder:
        std::filesystem::remove_all(c.path, error);
        ok = !error;
        break;
      case Change::renamed:
        ok = ::rename(c.to.c_str(), c.path.c_str()) == 0 && (c.kept.empty() || ::rename(c.kept.c_str(), c.to.c_str()) == 0);
        break;
      case Change::removed:
        ok = c.kept.empty() || ::rename(c.kept.c_str(), c.path.c_str()) == 0;
        break;
      case Change::removed_folder:
        ok = ::mkdir(c.path.c_str(), c.mode) == 0;
        break;
    }
    if (!ok) unsupported("cannot undo a change of " + c.path + ": " + strerror(errno));
  }
  const std::string line = "power_cut: the power went out at file call " + std::to_string(s.calls) + "\n";
  [[maybe_unused]] ssize_t ignored = ::write(2, line.data(), line.size());
  ::_exit(kCutExitCode);
}

bool writes(int flags) { return (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) != 0; }

int do_open(int dirfd, const char* path, int flags, mode_t mode) {
  REAL(openat);
  std::unique_lock<std::recursive_mutex> held(lock);
  const std::string full = writes(flags) ? resolve(dirfd, path) : std::string();
  if (!tracked(full)) {
    held.unlock();
    return real_openat(dirfd, path, flags, mode);
  }
  State& s = state();
  call("open", full);
  struct stat before {};
  const bool existed = ::lstat(full.c_str(), &before) == 0;
  const int fd = real_openat(dirfd, path, flags, mode);
  if (fd < 0) return fd;
  const int saved = errno;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    const auto inode = std::make_pair(st.st_dev, st.st_ino);
    auto [file, fresh] = s.files.try_emplace(inode);
    if (fresh) {
      file->second.keep_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 512);
      if (file->second.keep_fd < 0 || (flags & O_ACCMODE) == O_RDONLY) unsupported("a tracked file opened without write access: " + full);
      file->second.synced = existed && !S_ISLNK(before.st_mode) ? before.st_size : 0;
      file->second.path = full;
    }
    s.writers[fd] = inode;
    if ((flags & O_TRUNC) && existed && before.st_size > 0) changed(fd, 0, before.st_size);
  }
  if (!existed && (flags & O_CREAT)) record(Change::created, full, {parent(full)});
  errno = saved;
  return fd;
}

mode_t mode_arg(int flags, va_list args) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? static_cast<mode_t>(va_arg(args, int)) : 0;
}

ssize_t after_write(int fd, off_t at, ssize_t written) {
  if (written > 0) changed(fd, at, at + written);
  return written;
}

/// Where the next write on fd lands, and counts the call; false when fd is not tracked.
bool before_write(int fd, off_t* at) {
  auto w = state().writers.find(fd);
  if (inside || w == state().writers.end()) return false;
  call("write", state().files[w->second].path);
  const int flags = ::fcntl(fd, F_GETFL);
  *at = flags >= 0 && (flags & O_APPEND) ? size_of(fd) : ::lseek(fd, 0, SEEK_CUR);
  return true;
}

int do_unlink(int dirfd, const char* path, int flags) {
  REAL(unlinkat);
  std::lock_guard<std::recursive_mutex> held(lock);
  const std::string full = resolve(dirfd, path);
  if (!tracked(full)) return real_unlinkat(dirfd, path, flags);
  call(flags & AT_REMOVEDIR ? "rmdir" : "unlink", full);
  struct stat st {};
  const bool existed = ::lstat(full.c_str(), &st) == 0;
  const std::string kept = existed && !(flags & AT_REMOVEDIR) && !S_ISDIR(st.st_mode) ? keep(full) : std::string();
  const int rc = real_unlinkat(dirfd, path, flags);
  const int saved = errno;
  if (rc != 0) {
    drop(kept);
  } else if (flags & AT_REMOVEDIR) {
    record(Change::removed_folder, full, {parent(full)}, "", "", st.st_mode & 07777);
  } else {
    record(Change::removed, full, {parent(full)}, "", kept);
  }
  errno = saved;
  return rc;
}

int do_rename(int olddirfd, const char* oldpath, int newdirfd, const char* newpath) {
  REAL(renameat);
  std::lock_guard<std::recursive_mutex> held(lock);
  const std::string from = resolve(olddirfd, oldpath), to = resolve(newdirfd, newpath);
  const bool from_tracked = tracked(from), to_tracked = tracked(to);
  if (!from_tracked && !to_tracked) return real_renameat(olddirfd, oldpath, newdirfd, newpath);
  if (from_tracked != to_tracked) unsupported("a rename across the tracked folder's boundary: " + from + " -> " + to);
  call("rename", to);
  struct stat st {};
  if (::lstat(from.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) unsupported("renaming a folder: " + from);
  const std::string kept = keep(to);
  const int rc = real_renameat(olddirfd, oldpath, newdirfd, newpath);
  const int saved = errno;
  if (rc != 0) {
    drop(kept);
  } else {
    record(Change::renamed, from, {parent(from), parent(to)}, to, kept);
  }
  errno = saved;
  return rc;
}

int do_mkdir(int dirfd, const char* path, mode_t mode) {
  REAL(mkdirat);
  std::lock_guard<std::recursive_mutex> held(lock);
  const std::string full = resolve(dirfd, path);
  if (!tracked(full)) return real_mkdirat(dirfd, path, mode);
  call("mkdir", full);
  const int rc = real_mkdirat(dirfd, path, mode);
  if (rc == 0) record(Change::made_folder, full, {parent(full)});
  return rc;
}

int do_symlink(const char* target, int dirfd, const char* path) {
  REAL(symlinkat);
  std::lock_guard<std::recursive_mutex> held(lock);
  const std::string full = resolve(dirfd, path);
  if (!tracked(full)) return real_symlinkat(target, dirfd, path);
  call("symlink", full);
  const int rc = real_symlinkat(target, dirfd, path);
  if (rc == 0) record(Change::created, full, {parent(full)});
  return rc;
}

int do_link(int olddirfd, const char* oldpath, int newdirfd, const char* newpath, int flags) {
  REAL(linkat);
  std::lock_guard<std::recursive_mutex> held(lock);
  const std::string full = resolve(newdirfd, newpath);
  if (!tracked(full)) return real_linkat(olddirfd, oldpath, newdirfd, newpath, flags);
  call("link", full);
  const int rc = real_linkat(olddirfd, oldpath, newdirfd, newpath, flags);
  if (rc == 0) record(Change::created, full, {parent(full)});
  return rc;
}

int do_sync(int fd, bool data_only) {
  REAL(fsync);
  REAL(fdatasync);
  std::lock_guard<std::recursive_mutex> held(lock);
  const auto real = [&] { return data_only ? real_fdatasync(fd) : real_fsync(fd); };
  State& s = state();
  if (!s.active || inside) return real();
  struct stat st {};
  if (::fstat(fd, &st) != 0) return real();
  const std::string path = fd_path(fd);
  if (S_ISDIR(st.st_mode)) {
    if (!tracked(path) && path != s.root) return real();
    call("fsync-folder", path);
    if (!s.ignore_fsync) folder_synced(path);
    return 0;
  }
  auto file = s.files.find({st.st_dev, st.st_ino});
  if (file == s.files.end()) {
    if (!tracked(path)) return real();
    call("fsync", path);  // nothing unsynced to lose: opened read-only, never written
    return 0;
  }
  call("fsync", file->second.path);
  if (!s.ignore_fsync) {
    file->second.synced = st.st_size;
    file->second.changed.clear();
  }
  return 0;
}

}  // namespace

extern "C" {

int open(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = mode_arg(flags, args);
  va_end(args);
  return do_open(AT_FDCWD, path, flags, mode);
}
int open64(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = mode_arg(flags, args);
  va_end(args);
  return do_open(AT_FDCWD, path, flags, mode);
}
int openat(int dirfd, const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = mode_arg(flags, args);
  va_end(args);
  return do_open(dirfd, path, flags, mode);
}
int openat64(int dirfd, const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = mode_arg(flags, args);
  va_end(args);
  return do_open(dirfd, path, flags, mode);
}
int creat(const char* path, mode_t mode) { return do_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode); }
int creat64(const char* path, mode_t mode) { return do_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode); }

FILE* fopen(const char* path, const char* mode) {
  REAL(fopen);
  if (::strpbrk(mode, "wa+") && tracked(resolve(AT_FDCWD, path))) unsupported(std::string("fopen for writing: ") + path);
  return real_fopen(path, mode);
}
FILE* fopen64(const char* path, const char* mode) {
  REAL(fopen64);
  if (::strpbrk(mode, "wa+") && tracked(resolve(AT_FDCWD, path))) unsupported(std::string("fopen for writing: ") + path);
  return real_fopen64(path, mode);
}

ssize_t write(int fd, const void* buf, size_t n) {
  REAL(write);
  std::lock_guard<std::recursive_mutex> held(lock);
  off_t at = 0;
  if (!before_write(fd, &at)) return real_write(fd, buf, n);
  return after_write(fd, at, real_write(fd, buf, n));
}
ssize_t writev(int fd, const struct iovec* iov, int count) {
  REAL(writev);
  std::lock_guard<std::recursive_mutex> held(lock);
  off_t at = 0;
  if (!before_write(fd, &at)) return real_writev(fd, iov, count);
  return after_write(fd, at, real_writev(fd, iov, count));
}
ssize_t pwrite(int fd, const void* buf, size_t n, off_t at) {
  REAL(pwrite);
  std::lock_guard<std::recursive_mutex> held(lock);
  off_t ignored = 0;
  if (!before_write(fd, &ignored)) return real_pwrite(fd, buf, n, at);
  return after_write(fd, at, real_pwrite(fd, buf, n, at));
}
ssize_t pwrite64(int fd, const void* buf, size_t n, off_t at) { return pwrite(fd, buf, n, at); }

int ftruncate(int fd, off_t length) {
  REAL(ftruncate);
  std::lock_guard<std::recursive_mutex> held(lock);
  auto w = state().writers.find(fd);
  if (inside || w == state().writers.end()) return real_ftruncate(fd, length);
  call("ftruncate", state().files[w->second].path);
  const off_t before = size_of(fd);
  const int rc = real_ftruncate(fd, length);
  if (rc == 0) changed(fd, std::min(before, length), std::max(before, length));
  return rc;
}
int ftruncate64(int fd, off_t length) { return ftruncate(fd, length); }

int fsync(int fd) { return do_sync(fd, false); }
int fdatasync(int fd) { return do_sync(fd, true); }
void sync() { unsupported("sync()"); }
int syncfs(int) { unsupported("syncfs()"); }

int close(int fd) {
  REAL(close);
  {
    std::lock_guard<std::recursive_mutex> held(lock);
    auto w = state().writers.find(fd);
    if (!inside && w != state().writers.end()) {
      call("close", state().files[w->second].path);
      state().writers.erase(w);
    }
  }
  return real_close(fd);
}

int rename(const char* from, const char* to) { return do_rename(AT_FDCWD, from, AT_FDCWD, to); }
int renameat(int olddirfd, const char* from, int newdirfd, const char* to) { return do_rename(olddirfd, from, newdirfd, to); }
int renameat2(int olddirfd, const char* from, int newdirfd, const char* to, unsigned int flags) {
  if (flags != 0 && (tracked(resolve(olddirfd, from)) || tracked(resolve(newdirfd, to))))
    unsupported("renameat2 with flags");
  if (flags != 0) {
    static const auto real_renameat2 = next<int (*)(int, const char*, int, const char*, unsigned int)>("renameat2");
    return real_renameat2(olddirfd, from, newdirfd, to, flags);
  }
  return do_rename(olddirfd, from, newdirfd, to);
}
int link(const char* from, const char* to) { return do_link(AT_FDCWD, from, AT_FDCWD, to, 0); }
int linkat(int olddirfd, const char* from, int newdirfd, const char* to, int flags) {
  return do_link(olddirfd, from, newdirfd, to, flags);
}
int symlink(const char* target, const char* path) { return do_symlink(target, AT_FDCWD, path); }
int symlinkat(const char* target, int dirfd, const char* path) { return do_symlink(target, dirfd, path); }
int unlink(const char* path) { return do_unlink(AT_FDCWD, path, 0); }
int unlinkat(int dirfd, const char* path, int flags) { return do_unlink(dirfd, path, flags); }
int rmdir(const char* path) { return do_unlink(AT_FDCWD, path, AT_REMOVEDIR); }
int remove(const char* path) {  // glibc's remove calls unlink and rmdir internally, out of reach: done here
  struct stat st {};
  const bool folder = ::lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
  return do_unlink(AT_FDCWD, path, folder ? AT_REMOVEDIR : 0);
}
int mkdir(const char* path, mode_t mode) { return do_mkdir(AT_FDCWD, path, mode); }
int mkdirat(int dirfd, const char* path, mode_t mode) { return do_mkdir(dirfd, path, mode); }

}  // extern "C"
