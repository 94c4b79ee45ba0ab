// A run folder from elsewhere is hostile input, its links included: tapegrad never writes through a link,
// and never writes or removes anything outside the run folder. Each row below plants a link (or a file of
// the wrong kind) at a name tapegrad writes in a run folder, pointing at a canary file or folder outside
// it, then runs the real `tapegrad train --resume` or `train --out ... --overwrite`. The canaries keep their
// bytes and nothing new appears beside them; the run either succeeds, the planted entry replaced by
// tapegrad's own, or is refused with one line naming the entry and leaving the run folder as it was.
// docs/reliability.md ("A run folder from elsewhere: links") lists each row by name, with the choice made.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "support/bad_input.h"
#include "support/temp_dir.h"
#include "train/io/atomic_file.h"
#include "train/parallel/communicator.h"
#include "train/parallel/data_parallel.h"

using namespace tapegrad;
using namespace tapegrad::testing;
namespace fs = std::filesystem;

namespace {

const std::string kCanaryBytes = "the canary's own bytes\n";

std::string train_args(const std::string& out, int64_t steps) {
  return cat("train --task majority --symbols 6 --min-len 4 --max-len 12 --d-model 16 --heads 2 --ff 32 ",
             "--batch-size 16 --seed 7 --threads 1 --eval-every 10 --steps ", steps, " --out ", quote(out));
}

/// Where a case plants: the run folder and, outside it, a canary file and a canary folder holding one.
struct Place {
  std::string run, outside, canary, canary_folder;
  void link(const std::string& name, const std::string& target) const { fs::create_symlink(target, run + "/" + name); }
};

enum class Command { resume, overwrite };

struct LinkCase {
  std::string name;                           // the row of docs/reliability.md
  std::string entry;                          // the planted entry, relative to the run folder
  Command command;
  std::function<void(const Place&)> plant;
  std::string refusal;                        // what the one line says; empty: the run succeeds
};

const std::string kLinkRefusal = "is a symbolic link; tapegrad never writes through links in a run folder: remove it";

std::vector<LinkCase> link_cases() {
  const auto to_canary = [](std::string name) { return [name](const Place& p) { p.link(name, p.canary); }; };
  const auto dangling = [](std::string name) {
    return [name](const Place& p) { p.link(name, p.outside + "/created-through-a-link"); };
  };
  const auto user_name_to_canary = [](std::string name) {
    return [name](const Place& p) {
      fs::remove(p.run + "/" + name);
      p.link(name, p.canary);
    };
  };
  std::vector<LinkCase> cases{
      {".lock links to a file outside", ".lock", Command::resume,
       [](const Place& p) {
         fs::remove(p.run + "/.lock");
         p.link(".lock", p.canary);
       },
       kLinkRefusal},
      {".lock links to a file outside, train --out", ".lock", Command::overwrite,
       [](const Place& p) {
         fs::remove(p.run + "/.lock");
         p.link(".lock", p.canary);
       },
       kLinkRefusal},
      {".lock is a dangling link", ".lock", Command::resume,
       [](const Place& p) {
         fs::remove(p.run + "/.lock");
         p.link(".lock", p.outside + "/created-through-a-link");
       },
       kLinkRefusal},
      {".lock is a folder", ".lock", Command::resume,
       [](const Place& p) {
         fs::remove(p.run + "/.lock");
         fs::create_directory(p.run + "/.lock");
       },
       "is a folder, where tapegrad keeps a regular file: remove it"},
      {".lock is a hard link to a file outside", ".lock", Command::resume,
       [](const Place& p) {  // O_NOFOLLOW does not see it: the same file under two names
         fs::remove(p.run + "/.lock");
         fs::create_hard_link(p.canary, p.run + "/.lock");
       },
       "has 2 names (a hard link to a file elsewhere)"},
      {".lock is a FIFO", ".lock", Command::resume,
       [](const Place& p) {
         fs::remove(p.run + "/.lock");
         REQUIRE(::mkfifo((p.run + "/.lock").c_str(), 0644) == 0);
       },
       "is a FIFO, where tapegrad keeps a regular file: remove it"},
      {".checkpoints links to a folder outside", ".checkpoints", Command::resume,
       [](const Place& p) {
         fs::rename(p.run + "/.checkpoints", p.outside + "/checkpoints");
         p.link(".checkpoints", p.outside + "/checkpoints");
       },
       kLinkRefusal},
      {".checkpoints links to a folder outside, train --out", ".checkpoints", Command::overwrite,
       [](const Place& p) {
         fs::rename(p.run + "/.checkpoints", p.outside + "/checkpoints");
         p.link(".checkpoints", p.outside + "/checkpoints");
       },
       kLinkRefusal},
      {"metrics.csv links to a file outside", "metrics.csv", Command::resume,
       [](const Place& p) {
         fs::copy_file(p.run + "/metrics.csv", p.outside + "/metrics.csv");
         fs::remove(p.run + "/metrics.csv");
         p.link("metrics.csv", p.outside + "/metrics.csv");
       },
       ""},
      {"curves.svg links to a file outside", "curves.svg", Command::resume,
       [](const Place& p) {
         fs::remove(p.run + "/curves.svg");
         p.link("curves.svg", p.canary);
       },
       ""},
      {"metrics.csv.tmp links to a file outside", "metrics.csv.tmp", Command::resume, to_canary("metrics.csv.tmp"), ""},
      {"curves.svg.tmp links to a file outside", "curves.svg.tmp", Command::resume, to_canary("curves.svg.tmp"), ""},
      {"metrics.csv.tmp is a dangling link", "metrics.csv.tmp", Command::resume, dangling("metrics.csv.tmp"), ""},
      {"latest links to a checkpoint outside (an absolute link)", "latest", Command::resume,
       [](const Place& p) {
         fs::copy(p.run + "/.checkpoints/step-000000010", p.outside + "/checkpoint");
         fs::remove(p.run + "/latest");
         p.link("latest", p.outside + "/checkpoint");
       },
       ""},
      {"best links outside through ..", "best", Command::overwrite,
       [](const Place& p) {
         fs::copy(p.run + "/.checkpoints/step-000000010", p.outside + "/checkpoint");
         fs::remove(p.run + "/best");
         p.link("best", "../outside/checkpoint");
       },
       ""},
      {"latest.tmp links to a folder outside", "latest.tmp", Command::resume,
       [](const Place& p) { p.link("latest.tmp", p.canary_folder); }, ""},
      {"model.safetensors links to a file outside", "model.safetensors", Command::overwrite,
       [](const Place& p) {
         fs::remove(p.run + "/model.safetensors");
         p.link("model.safetensors", p.canary);
       },
       ""},
      {"trainer.json links to a file outside", "trainer.json", Command::overwrite,
       [](const Place& p) {
         fs::remove(p.run + "/trainer.json");
         p.link("trainer.json", p.canary);
       },
       ""},
      {"the next step folder's name links to a folder outside", ".checkpoints/step-000000020", Command::resume,
       [](const Place& p) { p.link(".checkpoints/step-000000020", p.canary_folder); }, ""},
      {"the next step folder's name is a dangling link", ".checkpoints/step-000000020", Command::resume,
       dangling(".checkpoints/step-000000020"), ""},
      {"a leftover step folder holds links outside", ".checkpoints/step-000000005", Command::resume,
       [](const Place& p) {
         fs::create_directory(p.run + "/.checkpoints/step-000000005");
         p.link(".checkpoints/step-000000005/model.safetensors.tmp", p.canary);
         p.link(".checkpoints/step-000000005/folder", p.canary_folder);
       },
       ""},
      {"best.tmp links to a folder outside", "best.tmp", Command::overwrite,
       [](const Place& p) { p.link("best.tmp", p.canary_folder); }, ""},
      {"latest is a folder, not a link", "latest", Command::resume,
       [](const Place& p) {  // a copy of the checkpoint where the link was: refused before any step is trained
         const fs::path target = fs::path(p.run) / fs::read_symlink(p.run + "/latest");
         fs::remove(p.run + "/latest");
         fs::copy(target, p.run + "/latest");
       },
       "is not a link, where tapegrad keeps a link to a checkpoint: remove it"},
  };
  // The rest of the names users open, as model.safetensors and trainer.json above.
  for (const char* name : {"config.json", "vocab.txt", "labels.txt", "optimizer.safetensors"})
    cases.push_back({cat(name, " links to a file outside"), name, Command::overwrite, user_name_to_canary(name), ""});
  return cases;
}

}  // namespace

TEST_CASE("links: a run folder's links never lead tapegrad to write or remove outside it") {
  TempDir dir("tapegrad_test_symlinks");
  const std::string base = dir / "base";
  {
    const Result r = run_cli(dir, train_args(base, 10));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  const std::string docs = read_file(std::string(TAPEGRAD_SOURCE_DIR) + "/docs/reliability.md");
  for (const LinkCase& c : link_cases()) {
    SECTION(c.name) {
      INFO("docs/reliability.md lists \"" << c.name << "\"");
      CHECK_THAT(docs, Catch::Contains("| " + c.name + " |"));
      const std::string folder = dir / "case";
      fs::remove_all(folder);
      fs::create_directories(folder + "/outside/folder");
      Place p{folder + "/run", folder + "/outside", folder + "/outside/canary.txt", folder + "/outside/folder"};
      fs::copy(base, p.run, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
      std::ofstream(p.canary, std::ios::binary) << kCanaryBytes;
      std::ofstream(p.canary_folder + "/inside.txt", std::ios::binary) << kCanaryBytes;
      c.plant(p);
      const auto outside_before = folder_contents(p.outside), run_before = folder_contents(p.run);

      const std::string args = c.command == Command::resume ? cat("train --resume ", quote(p.run), " --steps 20")
                                                            : train_args(p.run, 10) + " --overwrite";
      const Result r = run_cli(dir, args);
      INFO(args << "\n" << r.err);
      CHECK(folder_contents(p.outside) == outside_before);  // nothing written, created or removed outside
      CHECK(read_file(p.canary) == kCanaryBytes);
      const std::string entry = p.run + "/" + c.entry;
      if (!c.refusal.empty()) {
        require_one_line_error(r, entry + ": " + c.refusal);
        CHECK(folder_contents(p.run) == run_before);  // refused before it touched anything
      } else {
        REQUIRE(r.exit_code == 0);
        // The planted entry is gone or tapegrad's own: no link out of the run folder is left at its name.
        std::error_code not_a_link;
        const fs::path target = fs::read_symlink(entry, not_a_link);
        CHECK((not_a_link || target.string().find("outside") == std::string::npos));
        const Result predicted = run_cli(dir, cat("predict --checkpoint ", quote(p.run), " --text 't1 t3 t3 t0'"));
        INFO(predicted.err);
        CHECK(predicted.exit_code == 0);
        CHECK(fs::read_symlink(p.run + "/model.safetensors") == "latest/model.safetensors");
      }
    }
  }
}

TEST_CASE("links: write_file_atomic replaces a link at the path or at its .tmp, and never writes through one") {
  TempDir dir("tapegrad_test_symlinks");
  const std::string canary = dir.file("canary.txt", kCanaryBytes), target = dir / "target.txt";
  const std::string dangling_target = dir / "made-through-a-link";
  for (const std::string planted : {"path", "tmp", "dangling tmp", "dangling path"}) {
    INFO(planted);
    const std::string path = dir / cat("file-", planted.size());
    const std::string link_at = planted.find("tmp") != std::string::npos ? path + ".tmp" : path;
    fs::create_symlink(planted.find("dangling") != std::string::npos ? dangling_target : canary, link_at);
    write_file_atomic(path, std::string_view("new bytes"));
    CHECK(!fs::is_symlink(path));
    CHECK(read_file(path) == "new bytes");
    CHECK(!fs::exists(fs::symlink_status(path + ".tmp")));
    CHECK(read_file(canary) == kCanaryBytes);
    CHECK(!fs::exists(dangling_target));
  }
  // A folder at the .tmp cannot be unlinked: one error naming it, and the folder stays.
  const std::string blocked = dir / "blocked";
  fs::create_directories(blocked + ".tmp/inside");
  CHECK_THROWS_WITH(write_file_atomic(blocked, std::string_view("x")),
                    Catch::Contains(blocked + ".tmp: cannot remove the leftover"));
  CHECK(fs::is_directory(blocked + ".tmp/inside"));
}

TEST_CASE("links: require_own_entry refuses a link or the wrong kind of entry, and accepts what tapegrad makes") {
  TempDir dir("tapegrad_test_symlinks");
  const std::string file = dir.file("file", "x"), folder = dir / "folder", link = dir / "link";
  fs::create_directory(folder);
  fs::create_symlink(folder, link);
  CHECK_NOTHROW(require_own_entry(file, EntryKind::file));
  CHECK_NOTHROW(require_own_entry(folder, EntryKind::folder));
  CHECK_NOTHROW(require_own_entry(dir / "absent", EntryKind::file));
  CHECK_THROWS_WITH(require_own_entry(link, EntryKind::folder), Catch::Contains(link + ": " + kLinkRefusal));
  CHECK_THROWS_WITH(require_own_entry(file, EntryKind::folder),
                    Catch::Contains(file + ": is a regular file, where tapegrad keeps a folder"));
  CHECK_THROWS_WITH(require_own_entry(folder, EntryKind::file),
                    Catch::Contains(folder + ": is a folder, where tapegrad keeps a regular file"));
}

TEST_CASE("links: create_directories_durably makes every missing level and refuses a file in the way") {
  TempDir dir("tapegrad_test_symlinks");
  CHECK(create_directories_durably(dir / "a/b/c"));
  CHECK(fs::is_directory(dir / "a/b/c"));
  CHECK_FALSE(create_directories_durably(dir / "a/b/c"));
  CHECK_FALSE(create_directories_durably(dir / "a/b/c/"));
  const std::string file = dir.file("a/file", "x");
  CHECK_THROWS_WITH(create_directories_durably(file + "/below"), Catch::Contains(file + ": is a regular file, not a folder"));
}

TEST_CASE("links: the shared-directory probe is a new file, and leaves nothing behind") {
  TempDir dir("tapegrad_test_symlinks");
  const std::string canary = dir.file("canary.txt", kCanaryBytes);
  fs::create_symlink(canary, dir / "a-link");
  const auto before = folder_contents(dir.path.string());
  check_shared_directory(single_process(), dir.path.string());
  CHECK(folder_contents(dir.path.string()) == before);
}
