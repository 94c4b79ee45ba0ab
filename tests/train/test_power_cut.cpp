// Power loss, as opposed to a kill: the machine dies and the file system keeps only what was made durable.
// A `tapegrad train --resume` that publishes a checkpoint runs under the power-cut harness
// (tests/support/power_cut/power_cut.cpp, LD_PRELOAD), which cuts the power at its Nth file-changing call
// and applies its loss model (unsynced data lost, unsynced directory changes undone, or all of them kept as
// a journal may have committed them). After every cut, the run directory must load a complete checkpoint,
// the old step or the new one, and --resume must continue. With fsync turned into a no-op, the same cuts
// must lose a checkpoint: the harness bites, so the first test cannot pass by losing nothing.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli.h"
#include "support/temp_dir.h"

using namespace tapegrad;
using namespace tapegrad::testing;
namespace fs = std::filesystem;

namespace {

constexpr int kCutExitCode = 86;  // the harness's _exit code at the cut
constexpr int64_t kFirstStep = 10, kSecondStep = 20;

std::string train_args(const std::string& out) {
  return cat("train --task majority --symbols 6 --min-len 4 --max-len 12 --d-model 16 --heads 2 --ff 32 ",
             "--batch-size 16 --seed 7 --threads 1 --eval-every 10 --steps ", kFirstStep, " --out ", quote(out));
}

struct Cut {
  int64_t at = 0;                     // the file call the power goes out at; 0: never
  std::string keep_metadata = "0";    // "0": unsynced directory changes undone; "all": all kept
  bool ignore_fsync = false;          // a writer that never syncs
};

/// `tapegrad <args>` under the harness, which tracks everything under dir.
Result run_with_power_cut(const TempDir& dir, const Cut& cut, const std::string& args, const std::string& log = "") {
  const char* asan = std::getenv("ASAN_OPTIONS");
  // Under a sanitizer build the harness is loaded before the ASan runtime, which then must not insist on
  // being first.
  const std::string env = cat("LD_PRELOAD=", quote(TAPEGRAD_POWER_CUT_LIBRARY), " TAPEGRAD_POWER_CUT_ROOT=",
                              quote(dir.path.string()), " TAPEGRAD_POWER_CUT_AT=", cut.at,
                              " TAPEGRAD_POWER_CUT_KEEP_METADATA=", cut.keep_metadata,
                              " TAPEGRAD_POWER_CUT_IGNORE_FSYNC=", cut.ignore_fsync ? 1 : 0,
                              log.empty() ? "" : cat(" TAPEGRAD_POWER_CUT_LOG=", quote(log)), " ASAN_OPTIONS=",
                              quote(cat(asan ? asan : "", ":verify_asan_link_order=0")));
  return run_shell(dir, cat("timeout -k 10 120 env ", env, " ", tapegrad_command(), " ", args));
}

/// A fresh copy of the run of kFirstStep steps, to cut the power in.
std::string fresh_copy(const TempDir& dir, const std::string& base) {
  const std::string run = dir / "cut";
  fs::remove_all(run);
  fs::remove_all(dir / ".power-cut-keep");
  fs::copy(base, run, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  return run;
}

std::string resume_args(const std::string& run, int64_t steps) {
  return cat("train --resume ", quote(run), " --steps ", steps);
}

/// The file calls a counted (never cut) resume makes, "N op path" each; runs of writes to one file are
/// kept by their first and last (the calls between are the same crash point for the loss model: the file
/// is unsynced either way).
std::vector<int64_t> crash_points(const std::string& log_text, std::map<int64_t, std::string>* calls) {
  std::vector<int64_t> points;
  const std::vector<std::string> lines = lines_of(log_text);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::istringstream in(lines[i]);
    int64_t n = 0;
    std::string op, path;
    in >> n >> op >> path;
    (*calls)[n] = op + " " + path;
    const auto same_write = [&](size_t j) { return j < lines.size() && lines[j].substr(lines[j].find(' ')) == lines[i].substr(lines[i].find(' ')); };
    const bool inside_run = op == "write" && i > 0 && same_write(i - 1) && same_write(i + 1);
    if (!inside_run) points.push_back(n);
  }
  return points;
}

/// What a cut left: the step of the checkpoint `predict` and `--resume` see, or -1 with what failed.
struct Aftermath {
  int64_t step = -1;
  std::string failure;
};

/// The checks run under the harness too, without a cut: it skips their fsyncs, which would only cost time.
Aftermath after_the_cut(const TempDir& dir, const std::string& run) {
  Aftermath a;
  const Result predicted = run_with_power_cut(dir, {}, cat("predict --checkpoint ", quote(run), " --text 't1 t3 t3 t0'"));
  if (predicted.exit_code != 0 || lines_of(predicted.out).size() != 1) {
    a.failure = "predict: " + predicted.err;
    return a;
  }
  try {
    a.step = nlohmann::json::parse(read_file(run + "/trainer.json")).at("step").get<int64_t>();
  } catch (const std::exception& e) {
    a.failure = cat("trainer.json: ", e.what());
    return a;
  }
  const Result resumed = run_with_power_cut(dir, {}, resume_args(run, kSecondStep + 2));
  if (resumed.exit_code != 0) a.failure = "resume: " + resumed.err;
  return a;
}

}  // namespace

TEST_CASE("faults: a power cut at every file operation of a publication loses no checkpoint") {
  const std::string docs = read_file(std::string(TAPEGRAD_SOURCE_DIR) + "/docs/reliability.md");
  CHECK_THAT(docs, Catch::Contains("### Power loss"));
  CHECK_THAT(docs, Catch::Contains("| a power cut at every file operation of a publication loses no checkpoint |"));
  TempDir dir("tapegrad_test_power_cut");
  const std::string base = dir / "base";
  REQUIRE(run_cli(dir, train_args(base)).exit_code == 0);

  // Count the calls of a resume that publishes step kSecondStep (its metrics.csv, curves.svg, checkpoint
  // folder, links, and the removal of the old folder), without a cut.
  const std::string log = (fs::temp_directory_path() / cat("tapegrad_power_cut_log_", ::getpid())).string();
  fs::remove(log);
  {
    const Result counted = run_with_power_cut(dir, {}, resume_args(fresh_copy(dir, base), kSecondStep), log);
    INFO(counted.err);
    REQUIRE(counted.exit_code == 0);
  }
  std::map<int64_t, std::string> calls;
  std::vector<int64_t> points = crash_points(read_file(log), &calls);
  fs::remove(log);
#if defined(__SANITIZE_ADDRESS__)
  // Under the sanitizers a process costs about ten times as much: a quarter of the points (the last kept, so
  // that both sides of the publication are cut) run the same code for memory errors; the release build sweeps
  // them all.
  std::vector<int64_t> sample;
  for (size_t i = 0; i < points.size(); ++i)
    if (i % 4 == 0 || i + 1 == points.size()) sample.push_back(points[i]);
  points = sample;
#endif
  REQUIRE(calls.size() > 50);  // the .lock, two side files, six checkpoint files, the links, the removal
  for (const char* op : {"rename", "symlink", "fsync-folder", "rmdir"}) {
    INFO(op);
    CHECK(std::any_of(calls.begin(), calls.end(), [&](const auto& c) { return c.second.rfind(op, 0) == 0; }));
  }

  for (const std::string keep_metadata : {"0", "all"}) {
    std::set<int64_t> steps_seen;
    for (const int64_t at : points) {
      INFO("power cut at call " << at << " (" << calls[at] << "), unsynced directory changes "
                                << (keep_metadata == "0" ? "undone" : "kept"));
      const std::string run = fresh_copy(dir, base);
      const Result cut = run_with_power_cut(dir, {at, keep_metadata, false}, resume_args(run, kSecondStep));
      INFO(cut.err);
      REQUIRE(cut.exit_code == kCutExitCode);
      const Aftermath after = after_the_cut(dir, run);
      INFO(after.failure);
      REQUIRE(after.failure.empty());
      CHECK((after.step == kFirstStep || after.step == kSecondStep));
      steps_seen.insert(after.step);
    }
    // The cuts land on both sides of the publication: the harness cut a real process, and a durable
    // `latest` survives undoing what was not synced.
    CHECK(steps_seen == std::set<int64_t>{kFirstStep, kSecondStep});
  }
  std::cout << "power cut: " << points.size() << " crash points of " << calls.size()
            << " file calls, each in both loss models; every one left a loadable, resumable checkpoint" << std::endl;

  // The harness bites: a writer that never syncs, cut once its renames are on disk, loses the checkpoint
  // (`latest` names a folder whose files are empty).
  int64_t lost_at = 0;
  for (auto at = points.rbegin(); at != points.rend() && lost_at == 0; ++at) {
    const std::string run = fresh_copy(dir, base);
    REQUIRE(run_with_power_cut(dir, {*at, "all", true}, resume_args(run, kSecondStep)).exit_code == kCutExitCode);
    if (!after_the_cut(dir, run).failure.empty()) lost_at = *at;
  }
  INFO("with fsync a no-op, no crash point lost the checkpoint: the harness does not model data loss");
  CHECK(lost_at > 0);
}
