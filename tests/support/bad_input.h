#pragma once
// A row of a bad-input table: what docs/reliability.md lists, the command that gets it, and what the one line of
// the refusal must say; and what "nothing was touched" is checked against: a folder's contents.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "support/cli.h"

namespace tapegrad::testing {

struct BadInput {
  std::string name;       // as docs/reliability.md lists it
  std::string args;       // after `tapegrad`, shell-quoted
  std::string mentions;   // what the one line must say
  std::string input = {};  // stdin
};

/// Each case refused by `tapegrad <args>` with one line that says `mentions`, in tapegrad's words (never a
/// library's exception text). TAPEGRAD_PRINT_ERRORS=1 prints each row with the line, the test's folder left
/// out, for docs/reliability.md's tables.
inline void require_refused(const TempDir& dir, const std::vector<BadInput>& cases) {
  for (const BadInput& c : cases) {
    INFO(c.name << ": tapegrad " << c.args);
    const Result r = run_cli(dir, c.args, c.input);
    require_one_line_error(r, c.mentions);
    CHECK_THAT(r.err, !Catch::Contains("json.exception"));
    if (std::getenv("TAPEGRAD_PRINT_ERRORS")) {
      std::string shown = r.err.substr(0, r.err.size() - 1);
      const std::string folder = dir.path.string() + "/";
      for (size_t at; (at = shown.find(folder)) != std::string::npos;) shown.erase(at, folder.size());
      std::printf("| %s | `%s` |\n", c.name.c_str(), shown.c_str());
    }
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
