// docs/checkpoints.md's table of the components' settings is the registry's (nn::settings_by_variant), row
// for row: a setting declared, changed or removed without its row fails here, so the document cannot drift.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "nn/classifier.h"
#include "support/cli.h"

using namespace tapegrad;
using namespace testing;

namespace {

/// The row the registry makes for one variant's setting, as the table writes it.
std::string row_of(const nn::VariantSetting& s) {
  const std::string range = nn::range_text(s.spec);
  return cat("| ", s.kind, " | ", s.variant, " | `", s.spec.name, "` | ", nn::setting_type_name(s.spec.type), " | ",
             nn::format_setting(s.spec.default_value), " | ", range.empty() ? "" : "`" + range + "`", " | `",
             s.spec.flag, "` | ", s.spec.help, s.spec.changes_model ? "" : " (training only)", " |");
}

/// The rows of the table whose header starts "| kind | variant | key |".
std::vector<std::string> table_rows(const std::string& doc) {
  std::vector<std::string> rows;
  std::istringstream lines(doc);
  bool in_table = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("| kind | variant | key |")) {
      in_table = true;
      std::getline(lines, line);  // |---|---|...
      continue;
    }
    if (!in_table) continue;
    if (!line.starts_with("|")) break;
    rows.push_back(line);
  }
  return rows;
}

}  // namespace

TEST_CASE("docs: checkpoints.md's table of settings lists every declared setting of every built-in variant") {
  std::vector<std::string> expected;
  for (const nn::VariantSetting& s : nn::settings_by_variant())
    if (!s.variant.starts_with("test-")) expected.push_back(row_of(s));
  const std::vector<std::string> documented =
      table_rows(read_file(std::string(TAPEGRAD_SOURCE_DIR) + "/docs/checkpoints.md"));
  std::string want;
  for (const std::string& row : expected) want += row + "\n";
  INFO("the table should read:\n" << want);
  CHECK(documented == expected);
  CHECK(expected.size() >= 8);  // softmax causal, temperature; linear causal, eps; layernorm eps; moe's three
}
