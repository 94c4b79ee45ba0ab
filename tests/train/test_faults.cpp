// Faults during training lose nothing, checked on the real `tapegrad` process:
//   SIGKILL at random moments    the run directory always loads and predicts, --resume continues, and the
//                                run ends with the bytes of one never killed (TAPEGRAD_KILLS, `make soak`)
//   SIGTERM, SIGINT              a checkpoint of the step it stopped at, one line, exit 128 + signal;
//                                a second signal ends the process at once
//   a file-size limit, a full    one line naming the file and errno's text and the checkpoint still
//   tmpfs, a read-only folder    intact, which loads, predicts and resumes
//   two trainers on one --out    the second is refused by the lock before it touches anything
//   non-finite loss or weights   stopped with the step; weights that are not finite are never published
//   the same command twice       the same bytes
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "support/cli.h"
#include "support/temp_dir.h"
#include "train/io/interrupt.h"
#include "train/trainer.h"

using namespace tapegrad;
using testing::TempDir;
using namespace testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

/// A small model on the majority task, one thread, a fixed seed: every run of it computes the same bits.
std::vector<std::string> train_args(const std::string& out, int64_t steps, int64_t eval_every, int64_t d_model = 16) {
  return {"train", "--task", "majority", "--symbols", "6", "--min-len", "4", "--max-len", "12", "--d-model",
          std::to_string(d_model), "--heads", "2", "--ff", std::to_string(2 * d_model), "--batch-size", "16", "--seed",
          "7", "--threads", "1", "--steps", std::to_string(steps), "--eval-every", std::to_string(eval_every),
          "--log-every", "5", "--out", out};
}

std::string joined(const std::vector<std::string>& args) {
  std::string line;
  for (const std::string& a : args) {
    if (!line.empty()) line += ' ';
    line += quote(a);
  }
  return line;
}

/// A `tapegrad` process running in the background, stdout and stderr going to files.
struct Child {
  pid_t pid = -1;
  std::string out_path, err_path;

  /// Waits for it to end; the exit code or the signal that ended it, and what it printed.
  Result wait() const {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    Result r;
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    r.out = read_file(out_path);
    r.err = read_file(err_path);
    return r;
  }
  std::string err() const { return read_file(err_path); }
};

/// Starts `tapegrad <args>` with stdin from /dev/null; `file_size_limit` bytes as RLIMIT_FSIZE if given.
Child spawn(const TempDir& dir, const std::vector<std::string>& args, const std::string& name,
            rlim_t file_size_limit = RLIM_INFINITY) {
  std::vector<std::string> words{TAPEGRAD_CLI};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  Child child{-1, dir / (name + ".out"), dir / (name + ".err")};
  const pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    const int in = ::open("/dev/null", O_RDONLY), out = ::open(child.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644),
              err = ::open(child.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(127);
    const rlimit limit{file_size_limit, file_size_limit};
    if (file_size_limit != RLIM_INFINITY && ::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(127);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  REQUIRE(pid > 0);
  child.pid = pid;
  return child;
}

/// Polls until `done` holds; false after `seconds`.
template <class Predicate>
bool wait_until(Predicate done, double seconds = 60) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

/// metrics.csv's step, epoch, lr, train_loss, valid_loss and valid_accuracy columns (not the timing ones).
std::vector<std::string> metrics_without_timing(const std::string& path, int64_t up_to_step = INT64_MAX) {
  std::vector<std::string> rows;
  for (const std::string& line : lines_of(read_file(path))) {
    std::vector<std::string> cells;
    std::istringstream in(line);
    for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
    REQUIRE(cells.size() == 8);
    if (!rows.empty() && std::stoll(cells[0]) > up_to_step) continue;
    rows.push_back(cells[0] + "," + cells[1] + "," + cells[2] + "," + cells[3] + "," + cells[4] + "," + cells[5]);
  }
  return rows;
}

/// Two run directories hold the same final checkpoint, byte for byte, and the same metrics.csv rows.
void require_same_run(const std::string& a, const std::string& b) {
  INFO(a << " vs " << b);
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "best/model.safetensors"}) {
    INFO(file);
    const std::string bytes = read_file(a + "/" + file);
    REQUIRE(!bytes.empty());
    CHECK(bytes == read_file(b + "/" + file));
  }
  CHECK(metrics_without_timing(a + "/metrics.csv") == metrics_without_timing(b + "/metrics.csv"));
}

int64_t saved_step(const std::string& run) {
  return json::parse(read_file(run + "/trainer.json")).at("step").get<int64_t>();
}

/// `predict` on the run's latest checkpoint exits 0 with a label.
void require_predicts(const TempDir& dir, const std::string& run) {
  const Result r = run_cli(dir, cat("predict --checkpoint ", quote(run), " --text 't1 t3 t3 t0'"));
  INFO("predict --checkpoint " << run << ": " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(lines_of(r.out).size() == 1);
}

/// Files left by a checkpoint write cut short: a folder no link points at, or a .tmp.
bool has_write_debris(const std::string& run) {
  if (!fs::exists(run)) return false;  // killed before it made the folder
  std::set<std::string> live;
  for (const char* link : {"latest", "best"})
    if (fs::is_symlink(run + "/" + link)) live.insert(fs::read_symlink(run + "/" + link).filename().string());
  if (fs::exists(run + "/.checkpoints"))
    for (const auto& entry : fs::directory_iterator(run + "/.checkpoints"))
      if (!live.count(entry.path().filename().string())) return true;
  for (const auto& entry : fs::recursive_directory_iterator(run))
    if (entry.path().extension() == ".tmp") return true;
  return false;
}

/// A training run that stopped on an error: its last line on stderr is the one-line error, after the
/// progress it printed, with a non-zero exit that is not a signal.
void require_stopped_with(const Result& r, const std::string& mentions) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.signal == 0);
  CHECK(r.exit_code > 0);
  const std::vector<std::string> lines = lines_of(r.err);
  REQUIRE(!lines.empty());
  CHECK(lines.back().rfind("tapegrad train: ", 0) == 0);
  CHECK_THAT(lines.back(), Catch::Contains(mentions));
  CHECK_THAT(r.err, !Catch::Contains("terminate called"));
}

int64_t env_int(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::stoll(value) : fallback;
}

}  // namespace

TEST_CASE("faults: SIGKILL at random moments never loses a checkpoint, and the resumed run ends bit-identical") {
  const int64_t kills = env_int("TAPEGRAD_KILLS", 20);
  const uint64_t seed = static_cast<uint64_t>(env_int("TAPEGRAD_KILL_SEED", static_cast<int64_t>(std::random_device{}() >> 1)));
  std::cout << "kill loop: " << kills << " SIGKILLs, seed " << seed << " (TAPEGRAD_KILL_SEED=" << seed
            << " draws the same moments)" << std::endl;
  INFO("TAPEGRAD_KILL_SEED=" << seed);
  TempDir dir("tapegrad_test_faults");
  constexpr int64_t steps = 150, eval_every = 5;

  // The reference run, never killed, timed: its startup (until its first line) and the whole run
  const auto started = Clock::now();
  const auto seconds_since_start = [&] { return std::chrono::duration<double>(Clock::now() - started).count(); };
  const Child reference = spawn(dir, train_args(dir / "reference", steps, eval_every), "reference");
  REQUIRE(wait_until([&] { return reference.err().find("training ") != std::string::npos; }));
  const double startup_seconds = seconds_since_start();
  REQUIRE(reference.wait().exit_code == 0);
  const double run_seconds = seconds_since_start();

  // Moments from the start of a process: a quarter within its startup; the rest uniform over a quarter
  // of a whole run, so that a session gets a few checkpoints in before its kill, and training steps,
  // validation and checkpoint writes each get their share of the kills.
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution in_startup(0.25);
  std::uniform_real_distribution<double> startup(0, startup_seconds), later(0, run_seconds / 4);
  std::map<std::string, int64_t> landed;  // where the kills landed, as far as the run directory tells
  int64_t killed = 0, runs = 0;
  while (killed < kills) {
    const std::string out = dir / cat("killed", runs++);
    for (int64_t session = 0;; ++session) {
      const bool published = fs::is_symlink(out + "/latest");
      const std::vector<std::string> args = published ? std::vector<std::string>{"train", "--resume", out}
                                                      : train_args(out, steps, eval_every);
      const Child child = spawn(dir, args, "session");
      if (killed < kills) {
        const double moment = in_startup(rng) ? startup(rng) : later(rng);
        std::this_thread::sleep_for(std::chrono::duration<double>(moment));
        ::kill(child.pid, SIGKILL);
      }
      const Result r = child.wait();
      INFO("run " << out << " session " << session << ": " << joined(args) << "\n" << r.err);
      if (r.signal == 0) {  // it finished before the kill
        REQUIRE(r.exit_code == 0);
        break;
      }
      REQUIRE(r.signal == SIGKILL);
      ++killed;
      const bool debris = has_write_debris(out);
      ++landed[r.err.find("training ") == std::string::npos && r.err.find("resuming ") == std::string::npos
                   ? "during startup"
                   : debris ? "in a checkpoint write (it left a folder or a .tmp behind)"
                            : "in training steps or validation"];
      if (fs::is_symlink(out + "/latest")) require_predicts(dir, out);
    }
    require_same_run(dir / "reference", out);
    CHECK(saved_step(out) == steps);
  }
  std::cout << "kill loop: " << killed << " kills over " << runs << " runs, each ended equal to the reference; kills landed";
  for (const auto& [where, count] : landed) std::cout << " " << where << ": " << count << ";";
  std::cout << std::endl;
}

TEST_CASE("faults: SIGTERM and SIGINT save the step they stop at, exit 128 + signal, and resume bit-identical") {
  TempDir dir("tapegrad_test_faults");
  constexpr int64_t steps = 600, eval_every = 200;
  REQUIRE(run_cli(dir, joined(train_args(dir / "reference", steps, eval_every))).exit_code == 0);
  for (const int signal : {SIGTERM, SIGINT}) {
    const std::string name = signal_name(signal), out = dir / name;
    INFO(name);
    const Child child = spawn(dir, train_args(out, steps, eval_every), name);
    // After the first checkpoint, so that the one the signal writes is not the first, and some steps past
    // it, so that the signal lands between two validations (their checkpoint is the signal's own)
    REQUIRE(wait_until([&] { return fs::is_symlink(out + "/latest"); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ::kill(child.pid, signal);
    const Result r = child.wait();
    INFO(r.err);
    REQUIRE(r.signal == 0);
    CHECK(r.exit_code == 128 + signal);
    const std::vector<std::string> lines = lines_of(r.err);
    REQUIRE(!lines.empty());
    std::smatch match;
    const std::regex expected("interrupted by " + name + " at step ([0-9]+): checkpoint saved; continue with: "
                              "\\S+ train --resume (.*)");  // the program as started
    REQUIRE(std::regex_match(lines.back(), match, expected));
    const int64_t step = std::stoll(match[1]);
    CHECK(match[2] == out);
    REQUIRE(step < steps);
    CHECK(saved_step(out) == step);  // the checkpoint of the step it names, and the rows up to it
    CHECK(metrics_without_timing(out + "/metrics.csv") == metrics_without_timing(dir / "reference/metrics.csv", step));
    require_predicts(dir, out);
    const Result resumed = run_cli(dir, "train --resume " + quote(out));
    INFO(resumed.err);
    REQUIRE(resumed.exit_code == 0);
    require_same_run(dir / "reference", out);
  }
}

TEST_CASE("faults: a second signal ends the process at once, and the run directory still loads") {
  TempDir dir("tapegrad_test_faults");
  const std::string out = dir / "run";
  const Child child = spawn(dir, train_args(out, 100000, 50), "run");
  REQUIRE(wait_until([&] { return fs::is_symlink(out + "/latest"); }));
  // Two different signals, as standard signals of one kind pending together would merge into one.
  ::kill(child.pid, SIGTERM);
  ::kill(child.pid, SIGINT);
  const Result r = child.wait();
  INFO(r.err);
  CHECK((r.signal == SIGTERM || r.signal == SIGINT));
  CHECK(r.err.find("interrupted by") == std::string::npos);
  require_predicts(dir, out);
  const Result resumed = run_cli(dir, "train --resume " + quote(out) + " --steps " + std::to_string(saved_step(out) + 5));
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
}

TEST_CASE("faults: the interrupt handlers are installed only while training runs, and only record the signal") {
  struct sigaction before_term, before_int, during, after;
  ::sigaction(SIGTERM, nullptr, &before_term);
  ::sigaction(SIGINT, nullptr, &before_int);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, nullptr);  // as in a background job: stays ignored
  {
    InterruptGuard guard;
    ::sigaction(SIGTERM, nullptr, &during);
    CHECK(during.sa_handler != before_term.sa_handler);
    ::sigaction(SIGINT, nullptr, &during);
    CHECK(during.sa_handler == SIG_IGN);
    CHECK(guard.received() == 0);
    ::raise(SIGTERM);  // the process goes on
    CHECK(guard.received() == SIGTERM);
  }
  ::sigaction(SIGTERM, nullptr, &after);
  CHECK(after.sa_handler == before_term.sa_handler);
  ::sigaction(SIGINT, &before_int, nullptr);

  TempDir dir("tapegrad_test_faults");
  TrainOptions options;
  options.task = {"majority", 6, 4, 12};
  options.model.d_model = 8;
  options.model.n_heads = 2;
  options.model.d_ff = 8;
  options.steps = 3;
  options.threads = 1;
  options.out = dir / "run";
  std::ostringstream log;
  train(options, log);
  ::sigaction(SIGTERM, nullptr, &after);
  CHECK(after.sa_handler == before_term.sa_handler);
  ::sigaction(SIGINT, nullptr, &after);
  CHECK(after.sa_handler == before_int.sa_handler);
}

TEST_CASE("faults: a file-size limit while saving gets one line naming the file, and the previous checkpoint is intact") {
  TempDir dir("tapegrad_test_faults");
  const std::string out = dir / "run", straight = dir / "straight";
  REQUIRE(run_cli(dir, joined(train_args(out, 20, 10, 64))).exit_code == 0);
  REQUIRE(run_cli(dir, joined(train_args(straight, 30, 10, 64))).exit_code == 0);
  // A limit under model.safetensors, above the files written before it (metrics.csv, curves.svg)
  const auto model_size = fs::file_size(out + "/model.safetensors");
  const auto limit = model_size / 2;
  REQUIRE(fs::file_size(out + "/curves.svg") < limit);
  REQUIRE(fs::file_size(out + "/metrics.csv") < limit);

  const Child child = spawn(dir, {"train", "--resume", out, "--steps", "30"}, "limited", limit);
  const Result r = child.wait();
  require_stopped_with(r, "/.checkpoints/step-000000030/model.safetensors.tmp: write failed: File too large; "
                            "the checkpoint of step 20 in " + out + " is intact");
  CHECK(saved_step(out) == 20);
  CHECK(!has_write_debris(out));  // the half-written folder is gone, the disk space back
  require_predicts(dir, out);
  const Result resumed = run_cli(dir, "train --resume " + quote(out) + " --steps 30");
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  require_same_run(straight, out);
}

TEST_CASE("faults: a full disk or a read-only run directory gets one line, and the checkpoint there still loads") {
  if (::geteuid() != 0 || std::system("unshare -m true >/dev/null 2>&1") != 0) {
    WARN("skipped: needs root and mount namespaces (unshare -m) to mount a small tmpfs");
    return;
  }
  TempDir dir("tapegrad_test_faults");
  const std::string run = dir / "run", mount = dir / "mnt";
  REQUIRE(run_cli(dir, joined(train_args(run, 20, 10, 64))).exit_code == 0);
  fs::create_directories(mount);
  // tmpfs counts whole 4 KiB pages of file data. Room for the copy, for a new metrics.csv or curves.svg
  // beside the old one (each is renamed over it in turn), and half of the next model.safetensors.
  const auto pages = [](uintmax_t bytes) { return (bytes + 4095) / 4096; };
  uintmax_t used = 0;
  for (const auto& entry : fs::recursive_directory_iterator(run))
    if (entry.is_regular_file() && !entry.is_symlink()) used += pages(entry.file_size());
  const uintmax_t model = pages(fs::file_size(run + "/model.safetensors")),
                  side_files = std::max(pages(fs::file_size(run + "/metrics.csv")), pages(fs::file_size(run + "/curves.svg")));
  const uintmax_t room = side_files + 2 + model / 2;
  REQUIRE(side_files + 4 < model / 2);
  const std::string cli = quote(TAPEGRAD_CLI), copy = quote(mount + "/run");
  const std::string script = cat(
      "mount -t tmpfs -o size=", 4096 * (used + room), " tmpfs ", quote(mount), " && cp -a ", quote(run), " ", copy,
      " && { ", cli, " train --resume ", copy, " --steps 30 2>", quote(dir / "full.err"), "; echo $? >", quote(dir / "full.rc"),
      "; ", cli, " predict --checkpoint ", copy, " --text 't1 t3 t3 t0' >", quote(dir / "full.predict"), " 2>&1",
      "; mount -o remount,ro ", quote(mount), " && { ", cli, " train --resume ", copy, " --steps 30 2>", quote(dir / "ro.err"),
      "; echo $? >", quote(dir / "ro.rc"), "; ", cli, " predict --checkpoint ", copy, " --text 't1 t3 t3 t0' >",
      quote(dir / "ro.predict"), " 2>&1; echo $? >", quote(dir / "ro.predict.rc"), "; }; }");
  INFO(script);
  REQUIRE(std::system(cat("unshare -m sh -c ", quote(script)).c_str()) == 0);

  Result full{std::stoi(read_file(dir / "full.rc")), 0, "", read_file(dir / "full.err")};
  require_stopped_with(full, "model.safetensors.tmp: write failed: No space left on device; the checkpoint of step 20 in " +
                                   mount + "/run is intact");
  CHECK(lines_of(read_file(dir / "full.predict")).size() == 1);  // a label: the checkpoint of step 20 loads

  Result read_only{std::stoi(read_file(dir / "ro.rc")), 0, "", read_file(dir / "ro.err")};
  require_one_line_error(read_only, mount + "/run/.lock: cannot open the run's lock file: Read-only file system");
  CHECK(read_file(dir / "ro.predict.rc") == "0\n");
  // Run as root, permission bits stop nothing (chmod a-w is no test); a read-only mount does.
}

TEST_CASE("faults: a second trainer on the same --out is refused before it touches anything") {
  TempDir dir("tapegrad_test_faults");
  const std::string out = dir / "run";
  REQUIRE(run_cli(dir, joined(train_args(out, 10, 5))).exit_code == 0);

  // The lock held by this process, as a running trainer holds it
  const auto snapshot = [&] {
    std::map<std::string, std::string> files;
    for (const auto& entry : fs::recursive_directory_iterator(out))
      files[entry.path().string()] = entry.is_symlink() ? fs::read_symlink(entry.path()).string()
                                     : entry.is_regular_file() ? read_file(entry.path().string())
                                                               : "";
    return files;
  };
  {
    const int fd = ::open((out + "/.lock").c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
    const std::string pid = std::to_string(::getpid());
    REQUIRE(::ftruncate(fd, 0) == 0);
    REQUIRE(::pwrite(fd, pid.data(), pid.size(), 0) == static_cast<ssize_t>(pid.size()));
    const auto before = snapshot();
    std::vector<std::string> again = train_args(out, 10, 5);
    again.push_back("--overwrite");
    require_one_line_error(run_cli(dir, joined(again)),
                           "--out " + out + " is in use by another tapegrad train (pid " + pid + ")");
    require_one_line_error(run_cli(dir, "train --resume " + quote(out) + " --steps 20"),
                           "--resume " + out + " is in use by another tapegrad train (pid " + pid + ")");
    CHECK(snapshot() == before);
    ::close(fd);
  }

  // Two real trainers; the lock goes with the process, even a SIGKILLed one
  const Child first = spawn(dir, {"train", "--resume", out, "--steps", "100000"}, "first");
  REQUIRE(wait_until([&] { return first.err().find("resuming ") != std::string::npos; }));
  require_one_line_error(run_cli(dir, "train --resume " + quote(out)),
                         "--resume " + out + " is in use by another tapegrad train (pid " + std::to_string(first.pid) + ")");
  ::kill(first.pid, SIGKILL);
  CHECK(first.wait().signal == SIGKILL);
  const Result resumed = run_cli(dir, "train --resume " + quote(out) + " --steps " + std::to_string(saved_step(out) + 5));
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
}

TEST_CASE("faults: a non-finite loss or validation output stops training, and nothing it made is published") {
  // Adam at --lr 1e30: the first update makes the weights about 1e30, finite, but a forward through them
  // overflows float32. Validating every step, step 1's validation finds its logits not finite and stops the
  // run before that checkpoint is published (predict would refuse it: its outputs are NaN); validating
  // every 10 steps, the loss of step 2 is the first to see those weights.
  for (const int64_t eval_every : {1, 10}) {
    INFO("--eval-every " << eval_every);
    TempDir dir("tapegrad_test_faults");
    const std::string out = dir / "run";
    std::vector<std::string> args = train_args(out, 50, eval_every);
    for (const char* flag : {"--optimizer", "adam", "--lr", "1e30"}) args.push_back(flag);
    const Result r = run_cli(dir, joined(args));
    if (eval_every == 1) {
      require_stopped_with(r, "training diverged at step 1 (evaluate: the logits of example ");
      CHECK_THAT(r.err, Catch::Contains("are not finite") && Catch::Contains("the float32 forward overflows"));
    } else {
      require_stopped_with(r, "training diverged at step 2 (loss ");
      CHECK_THAT(r.err, Catch::Contains("): stopped; no checkpoint was saved in " + out + "; lower --lr"));
    }
    CHECK(!fs::exists(out + "/latest"));
  }
}

TEST_CASE("faults: weights that became non-finite are never published") {
  TempDir dir("tapegrad_test_faults");
  const std::string out = dir / "run";
  // SGD at 3e38 with an L2 decay of 3e38, near the largest float32: the first update makes the weights
  // infinite (or NaN) while the first loss was finite
  std::vector<std::string> args = train_args(out, 50, 1);
  for (const char* flag : {"--optimizer", "sgd", "--lr", "3e38", "--weight-decay", "3e38"}) args.push_back(flag);
  const Result r = run_cli(dir, joined(args));
  require_stopped_with(r, "training diverged at step 1 (parameter '");
  CHECK_THAT(r.err, Catch::Contains("after the update): stopped; no checkpoint was saved in " + out));
  CHECK(!fs::exists(out + "/latest"));
  CHECK((!fs::exists(out + "/.checkpoints") || fs::is_empty(out + "/.checkpoints")));
}

TEST_CASE("faults: the same command with the same seed gives the same bytes") {
  TempDir dir("tapegrad_test_faults");
  for (const char* out : {"a", "b"}) REQUIRE(run_cli(dir, joined(train_args(dir / out, 40, 10))).exit_code == 0);
  require_same_run(dir / "a", dir / "b");
}

TEST_CASE("faults: a signal during the last validation is not absorbed: the run says so and exits 128 + signal") {
  TempDir dir("tapegrad_test_faults");
  const std::string out = dir / "run";
  // Twenty quick steps and then one long validation (the last step's): long sequences and many examples, so that
  // the log says "validating ..." (said when it is expected to take 2 s or more: 8 000 examples took 2.2 s on a
  // Zen 4 core, too near; 16 000 take about 4.5 s) and the signal lands inside it, after the last step.
  const std::vector<std::string> args = {"train", "--task", "majority", "--symbols", "6", "--min-len", "200",
                                         "--max-len", "200", "--d-model", "16", "--heads", "2", "--ff", "32",
                                         "--batch-size", "16", "--valid-size", "16000", "--threads", "1",
                                         "--steps", "20", "--eval-every", "1000", "--out", out};
  for (const int signal : {SIGTERM, SIGINT}) {
    const std::string name = signal_name(signal);
    INFO(name);
    fs::remove_all(out);
    const Child child = spawn(dir, args, name);
    REQUIRE(wait_until([&] { return child.err().find("validating 16000 examples") != std::string::npos; }));
    ::kill(child.pid, signal);
    const Result r = child.wait();
    INFO(r.err);
    REQUIRE(r.signal == 0);
    CHECK(r.exit_code == 128 + signal);
    const std::vector<std::string> lines = lines_of(r.err);
    REQUIRE(!lines.empty());
    CHECK_THAT(lines.back(), Catch::StartsWith("interrupted by " + name + " during the last step, validation or "
                                               "checkpoint: the run had finished all its 20 steps"));
    CHECK(saved_step(out) == 20);  // the last checkpoint is whole
    require_predicts(dir, out);
  }
}
