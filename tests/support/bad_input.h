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

/// Every entry below dir, by its path relative to dir: a link's target, a file's bytes, "folder" or "other"
/// (none when dir does not exist). Two snapshots are equal only if nothing was written, created, removed or
/// relinked.
inline std::map<std::string, std::string> folder_contents(const std::string& dir) {
  namespace fs = std::filesystem;
  std::map<std::string, std::string> entries;
  if (!fs::exists(fs::symlink_status(dir))) return entries;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    const fs::file_status st = it->symlink_status();
    const std::string name = it->path().lexically_relative(dir).string();
    entries[name] = fs::is_symlink(st)        ? "-> " + fs::read_symlink(it->path()).string()
                    : fs::is_regular_file(st) ? read_file(it->path().string())
                    : fs::is_directory(st)    ? "folder"
                                              : "other";
  }
  return entries;
}

}  // namespace tapegrad::testing
