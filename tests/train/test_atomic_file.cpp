// write_file_atomic: the one way tapegrad writes a file (atomic_file.h). What readers rely on: the new
// bytes replace the old ones whole, pieces arrive in order, and a failure names the file and leaves no
// .tmp behind.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string_view>
#include <vector>

#include "autograd/error.h"
#include "support/cli.h"
#include "support/temp_dir.h"
#include "train/io/atomic_file.h"

using namespace tapegrad;
using testing::TempDir;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

TEST_CASE("train: write_file_atomic replaces a file whole, pieces in order, and leaves no .tmp") {
  TempDir dir("tapegrad_test_atomic_file");
  const std::string path = dir.file("out.bin", "the old contents, longer than the new ones");
  write_file_atomic(path, std::string_view("new"));
  CHECK(testing::read_file(path) == "new");

  const std::string zeros("\0\0", 2);
  const std::vector<std::string_view> pieces{"head", "", zeros, "tail"};
  write_file_atomic(path, pieces);
  CHECK(testing::read_file(path) == std::string("head\0\0tail", 10));
  CHECK_FALSE(fs::exists(path + ".tmp"));

  // A .tmp left by a killed write is taken over, not an error.
  dir.file("out.bin.tmp", "debris");
  write_file_atomic(path, std::string_view(""));
  CHECK(testing::read_file(path).empty());
  CHECK_FALSE(fs::exists(path + ".tmp"));
}

TEST_CASE("train: write_file_atomic failures name the file and remove the .tmp") {
  TempDir dir("tapegrad_test_atomic_file");
  const std::string missing = dir / "no/such/folder/file.txt";
  CHECK_THROWS_AS(write_file_atomic(missing, std::string_view("x")), IOError);
  CHECK_THROWS_WITH(write_file_atomic(missing, std::string_view("x")),
                    Contains(missing + ".tmp: cannot create: No such file or directory"));

  // A folder in the way: the .tmp is written, the rename fails, and the .tmp goes.
  const std::string blocked = dir / "blocked";
  fs::create_directories(fs::path(blocked) / "inside");
  CHECK_THROWS_WITH(write_file_atomic(blocked, std::string_view("x")), Contains(blocked + ": cannot rename into place"));
  CHECK_FALSE(fs::exists(blocked + ".tmp"));
  CHECK(fs::is_directory(fs::path(blocked) / "inside"));

  CHECK_THROWS_WITH(fsync_path(dir / "absent"), Contains(dir / "absent") && Contains("cannot open to sync"));
}
