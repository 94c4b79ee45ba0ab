#include "train/io/run_directory.h"
#include "train/io/shell_command.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <vector>

#include "autograd/error.h"

namespace tapegrad {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCheckpointStore = ".checkpoints";  // train/checkpoint/checkpoint.cpp publishes into it

bool is(const fs::path& path, fs::file_type type) {
  std::error_code error;
  return fs::symlink_status(path, error).type() == type;
}

}  // namespace

std::string run_holding_checkpoint(const std::string& path) {
  std::error_code error;
  const fs::path resolved = fs::weakly_canonical(fs::absolute(path, error), error);
  if (error) return "";
  fs::path run;
  for (const fs::path& part : resolved) {
    if (part == kCheckpointStore) return run.string();
    run /= part;
  }
  return "";
}

bool holds_run(const std::string& dir) {
  const fs::path root(dir);
  return is(root / "latest", fs::file_type::symlink) || is(root / kCheckpointStore, fs::file_type::directory) ||
         is(root / "trainer.json", fs::file_type::regular) || is(root / "trainer.json", fs::file_type::symlink);
}

void check_out_directory(const std::string& out, const std::string& flag) {
  if (out.empty()) throw ValueError(cat(flag, ": the path is empty"));
  if (const std::string run = run_holding_checkpoint(out); !run.empty())
    throw ValueError(cat(flag, " ", out, " is in a checkpoint of the run ", run,
                         ": tapegrad never writes into a checkpoint; choose another ", flag));
  std::error_code error;
  const fs::file_status status = fs::status(out, error);  // a link to a folder is that folder
  if (!fs::exists(status)) return;                        // made when the run starts
  if (!fs::is_directory(status)) throw ValueError(cat(flag, " ", out, " is a file, not a run directory"));
  if (holds_run(out)) return;
  // A run killed before its first checkpoint left its lock and perhaps its metrics: still a run of ours. Any
  // other name is somebody's file, which a run of tapegrad's names (config.json, metrics.csv...) could replace.
  static const std::set<std::string> unfinished_run = {".lock", "metrics.csv", "curves.svg", "metrics.csv.tmp",
                                                        "curves.svg.tmp"};
  std::vector<std::string> names;
  bool locked = false;
  for (fs::directory_iterator it(out, error), end; !error && it != end && names.size() < 1000; it.increment(error)) {
    const std::string name = it->path().filename().string();
    locked = locked || name == ".lock";
    names.push_back(name);
  }
  if (error) throw IOError(cat(flag, " ", out, ": cannot list the folder: ", error.message()));
  const bool ours = locked && std::all_of(names.begin(), names.end(), [](const std::string& n) {
    return unfinished_run.count(n) > 0;
  });
  if (names.empty() || ours) return;
  std::sort(names.begin(), names.end());
  std::string shown;
  for (size_t i = 0; i < std::min<size_t>(names.size(), 3); ++i) shown += cat(i ? ", " : "", in_quotes(names[i]));
  throw ValueError(cat(flag, " ", out, " is not empty and holds no tapegrad run (it holds ", shown,
                       names.size() > 3 ? ", ..." : "",
                       "): a run writes config.json, vocab.txt, labels.txt, metrics.csv, curves.svg and more into "
                       "its folder and would replace files of those names; choose a new or empty folder (--overwrite "
                       "replaces only a tapegrad run)"));
}

void check_resume_directory(const std::string& dir) {
  if (dir.empty()) throw ValueError("--resume: the path is empty");
  if (const std::string run = run_holding_checkpoint(dir); !run.empty())
    throw ValueError(cat("--resume ", dir, " is a checkpoint inside the run ", run,
                         ", not a run directory: `", suggested_command({"train", "--resume", run}),
                         "` continues that run, and --init ", dir, " starts a new run from these weights"));
}

}  // namespace tapegrad
