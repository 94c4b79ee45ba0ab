// A run folder never destroys what it should protect: `train --out` refuses a folder of somebody's own files
// (with or without --overwrite) and a checkpoint inside a run, `--resume` refuses a checkpoint (`run/best`)
// instead of growing a run inside it, and every refusal comes before the folder is created or locked. Each row
// is a row of docs/reliability.md (the last test checks that the page lists them).
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>

#include "support/bad_input.h"
#include "support/cli.h"
#include "support/temp_dir.h"
#include "train/io/run_lock.h"

using namespace tapegrad;
using testing::TempDir;
using namespace testing;
namespace fs = std::filesystem;

namespace {

/// Folders that hold somebody's files, by the name of what they hold: a run would replace some of them.
const std::map<std::string, std::map<std::string, std::string>>& foreign_folders() {
  static const std::map<std::string, std::map<std::string, std::string>> folders = {
      {"--out holding a user's config.json", {{"config.json", "{\"mine\": 1}\n"}}},
      {"--out holding a user's vocab.txt and labels.txt", {{"vocab.txt", "my\nwords\n"}, {"labels.txt", "a\nb\n"}}},
      {"--out holding a user's metrics.csv and curves.svg", {{"metrics.csv", "x,y\n1,2\n"}, {"curves.svg", "<svg/>"}}},
      {"--out holding a user's notes", {{"notes.txt", "do not lose\n"}}},
      {"--out holding a user's folder", {{"data/train.tsv", "pos\tgood\n"}}},
  };
  return folders;
}

std::vector<BadInput> out_not_a_run(const std::string& folder, const std::string& name) {
  return {{name, "train --steps 5 --out " + folder, "is not empty and holds no tapegrad run"},
          {name + ", with --overwrite", "train --steps 5 --overwrite --out " + folder,
           "--overwrite replaces only a tapegrad run"}};
}

std::vector<BadInput> checkpoint_paths(const std::string& run) {
  return {
      {"--resume of a run's best checkpoint", "train --resume " + run + "/best --steps 90",
       "is a checkpoint inside the run"},
      {"--resume of a run's latest checkpoint", "train --resume " + run + "/latest --steps 90",
       "/latest starts a new run from these weights"},
      {"--resume of a folder in .checkpoints", "train --resume " + run + "/.checkpoints/step-000000060 --steps 90",
       "is a checkpoint inside the run"},
      {"--out into a run's best checkpoint", "train --steps 5 --out " + run + "/best", "tapegrad never writes into a checkpoint"},
      {"--out below a run's .checkpoints", "train --steps 5 --out " + run + "/.checkpoints/mine",
       "tapegrad never writes into a checkpoint"},
      {"--attention-svg into a run's best checkpoint",
       "predict --checkpoint " + run + " --text t1 --attention-svg " + run + "/best/map.svg",
       "tapegrad never writes into a checkpoint"},
  };
}

}  // namespace

TEST_CASE("run folders: --out holding files that are not a run is refused, with or without --overwrite") {
  TempDir dir("tapegrad_test_run_folders");
  for (const auto& [name, files] : foreign_folders()) {
    INFO(name);
    const std::string folder = dir / "mine";
    fs::remove_all(folder);
    for (const auto& [file, bytes] : files) {
      fs::create_directories((fs::path(folder) / file).parent_path());
      dir.file("mine/" + file, bytes);
    }
    const auto before = folder_contents(folder);
    for (const BadInput& c : out_not_a_run(quote(folder), name)) {
      INFO(c.args);
      require_one_line_error(run_cli(dir, c.args), c.mentions);
      CHECK(folder_contents(folder) == before);  // not a byte changed, and no .lock
    }
  }
}

TEST_CASE("run folders: a checkpoint inside a run is never resumed or written into") {
  TempDir dir("tapegrad_test_run_folders");
  const std::string run = dir / "run";
  REQUIRE(run_cli(dir, "train --steps 60 --eval-every 30 --out " + quote(run)).exit_code == 0);
  REQUIRE(fs::exists(run + "/.checkpoints/step-000000060"));
  const auto before = folder_contents(run);
  for (const BadInput& c : checkpoint_paths(quote(run))) {
    INFO(c.name);
    require_one_line_error(run_cli(dir, c.args), c.mentions);
    CHECK(folder_contents(run) == before);
  }
  // What the message offers works: --init from the snapshot into a new folder, and --resume of the run.
  REQUIRE(run_cli(dir, "train --init " + quote(run + "/best") + " --steps 10 --out " + quote(dir / "tuned")).exit_code == 0);
  const Result resumed = run_cli(dir, "train --resume " + quote(run) + " --steps 90");
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
}

TEST_CASE("run folders: a --resume refused after the run is locked leaves every byte as it was, the lock file too") {
  TempDir dir("tapegrad_test_run_folders");
  const std::string run = dir / "run";
  REQUIRE(run_cli(dir, "train --steps 20 --eval-every 10 --out " + quote(run)).exit_code == 0);
  const std::string lock_before = read_file(run + "/.lock");
  const auto before = folder_contents(run);
  require_one_line_error(run_cli(dir, "train --resume " + quote(run) + " --steps 10"), "is not more than the 20 steps");
  fs::copy_file(run + "/metrics.csv", dir / "metrics.csv");
  fs::remove(run + "/metrics.csv");
  dir.file("run/metrics.csv", "not,a,header\n");
  const auto damaged = folder_contents(run);
  require_one_line_error(run_cli(dir, "train --resume " + quote(run) + " --steps 30"), "metrics.csv");
  CHECK(folder_contents(run) == damaged);
  CHECK(read_file(run + "/.lock") == lock_before);  // not even this process's pid
  fs::remove(run + "/metrics.csv");
  fs::copy_file(dir / "metrics.csv", run + "/metrics.csv");
  CHECK(folder_contents(run) == before);
}

TEST_CASE("run folders: a new, empty or unfinished run folder, and a run with --overwrite, are accepted") {
  TempDir dir("tapegrad_test_run_folders");
  fs::create_directories(dir / "empty");
  CHECK(run_cli(dir, "train --steps 5 --out " + quote(dir / "empty")).exit_code == 0);
  CHECK(run_cli(dir, "train --steps 5 --out " + quote(dir / "new/nested")).exit_code == 0);
  // A run killed before its first checkpoint leaves its lock and perhaps its metrics: a run of ours.
  fs::create_directories(dir / "unfinished");
  dir.file("unfinished/.lock", "123\n");
  dir.file("unfinished/metrics.csv", "step\n");
  CHECK(run_cli(dir, "train --steps 5 --out " + quote(dir / "unfinished")).exit_code == 0);
  CHECK(run_cli(dir, "train --steps 5 --overwrite --out " + quote(dir / "empty")).exit_code == 0);
  const Result again = run_cli(dir, "train --steps 5 --out " + quote(dir / "empty"));
  CHECK_THAT(again.err, Catch::Contains("already holds a training run"));
}

TEST_CASE("run folders: a run that fails after locking a new --out leaves no .lock, nor the folders it made") {
  TempDir dir("tapegrad_test_run_folders");
  // Adam at --lr 1e30 diverges at step 2 (test_faults.cpp), after the lock and before anything is written:
  // as a run out of memory in its first steps fails.
  const auto diverge_into = [&](const std::string& out) {
    const Result r = run_cli(dir, "train --steps 50 --eval-every 10 --optimizer adam --lr 1e30 --out " + quote(out));
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("training diverged at step 2"));
  };
  diverge_into(dir / "new/nested");
  CHECK(!fs::exists(dir / "new"));
  fs::create_directories(dir / "empty");
  diverge_into(dir / "empty");
  CHECK(fs::is_empty(dir / "empty"));  // the folder it found stays, as it was
  fs::create_directories(dir / "unfinished");
  dir.file("unfinished/.lock", "123\n");  // a run killed before its first checkpoint: its lock file stays
  diverge_into(dir / "unfinished");
  CHECK(fs::exists(dir / "unfinished/.lock"));
  // A folder the run wrote into keeps its lock file, which marks it as a tapegrad run's (check_out_directory).
  const std::string logged = dir / "logged";
  fs::create_directories(logged);
  try {
    RunLock lock(logged, "--out");
    dir.file("logged/metrics.csv", "step\n");
    throw ValueError("out of memory in the first steps");
  } catch (const ValueError&) {
  }
  CHECK(fs::exists(logged + "/.lock"));
  CHECK(run_cli(dir, "train --steps 5 --out " + quote(logged)).exit_code == 0);  // still a run of ours
  {
    RunLock lock(dir / "finished", "--out");  // no error: the lock file stays, as a finished run's
  }
  CHECK(fs::exists(dir / "finished/.lock"));
}

TEST_CASE("run folders: docs/reliability.md lists every row of this file") {
  std::vector<BadInput> rows = checkpoint_paths("run");
  for (const auto& [name, files] : foreign_folders())
    for (const BadInput& row : out_not_a_run("mine", name)) rows.push_back(row);
  require_documented(rows);
}
