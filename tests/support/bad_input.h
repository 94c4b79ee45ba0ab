#pragma once
// A row of a bad-input table: what docs/reliability.md lists, the command that gets it, and what the one line of
// the refusal must say; and what "nothing was touched" is checked against: a folder's contents.
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "support/cli.h"

namespace tapegrad::testing {

struct BadInput {
  std::string name;      // as docs/reliability.md lists it
  std::string args;      // after `tapegrad`, shell-quoted
  std::string mentions;  // what the one line must say
};

/// Each case refused by `tapegrad <args>` with one line that says `mentions`.
inline void require_refused(const TempDir& dir, const std::vector<BadInput>& cases) {
  for (const BadInput& c : cases) {
    INFO(c.name << ": tapegrad " << c.args);
    require_one_line_error(run_cli(dir, c.args), c.mentions);
  }
}

/// docs/reliability.md lists every row by name, as a table row "| name |".
inline void require_documented(const std::vector<BadInput>& rows) {
  const std::string docs = read_file(std::string(TAPEGRAD_SOURCE_DIR) + "/docs/reliability.md");
  REQUIRE(!docs.empty());
  for (const BadInput& row : rows) {
    INFO(row.name);
    CHECK_THAT(docs, Catch::Contains("| " + row.name + " |"));
  }
}

/// Every entry below dir with its bytes (a link as its target's name, a folder as "(dir)"): two snapshots are
/// equal only if nothing was written, created, removed or relinked.
inline std::map<std::string, std::string> folder_contents(const std::string& dir) {
  namespace fs = std::filesystem;
  std::map<std::string, std::string> entries;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string name = fs::relative(entry.path(), dir).string();
    if (entry.is_symlink()) entries[name] = "-> " + fs::read_symlink(entry.path()).string();
    else if (entry.is_regular_file()) entries[name] = read_file(entry.path().string());
    else entries[name] = "(dir)";
  }
  return entries;
}

}  // namespace tapegrad::testing
