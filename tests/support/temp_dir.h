#pragma once
// TempDir: a fresh directory under the system temp directory for one test, removed with everything in it.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace tapegrad::testing {

struct TempDir {
  std::filesystem::path path;

  explicit TempDir(const std::string& prefix = "tapegrad_test") {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// The path of a file named name inside the directory.
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  /// Writes contents (bytes as given) to a file named name inside the directory; returns its path.
  std::string file(const std::string& name, const std::string& contents) const {
    const std::string p = *this / name;
    std::ofstream(p, std::ios::binary) << contents;
    return p;
  }
};

}  // namespace tapegrad::testing
