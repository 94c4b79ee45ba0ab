// `mpirun -np N tapegrad train`, run for real on this machine with 2 and 4 ranks (docs/distributed.md):
//   training           only rank 0 logs and writes; the step's batch is batch_size x N and the log says so
//   exactness          --exact-reduction: N ranks x batch b land within the stated tolerance of one rank
//                      x batch N·b (TSV epochs with an uneven last batch included), bit-identical run to run
//   resume             a run resumed on the same ranks is bit-identical to one never stopped; a checkpoint
//                      continues on another number of ranks
//   failure            a rank killed with SIGKILL stops the others within seconds, and the checkpoint left
//                      behind resumes on 4 ranks and on one process; a rank that hangs stops the others
//                      after --comm-timeout; Ctrl-C stops every rank after the same step, with its checkpoint
//   bad set-ups        ranks with other flags, other data, no shared run directory, a bad flag on one rank,
//                      another subcommand under mpirun: one message, every rank gone
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "support/cli.h"
#include "support/temp_dir.h"
#include "train/checkpoint/safetensors.h"

using namespace tapegrad;
using namespace tapegrad::testing;
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

/// mpirun as every test here starts it: root allowed (CI runs as root), more ranks than cores allowed,
/// and no warning about network interfaces that this machine lacks.
std::string mpirun(int ranks) {
  return cat("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 ",
             "OMPI_MCA_btl_base_warn_component_unused=0 timeout -k 10 300 ", quote(TAPEGRAD_MPIEXEC), " -np ", ranks,
             " ");
}

/// `tapegrad train <args>` on `ranks` ranks.
Result train_on(const TempDir& dir, int ranks, const std::string& args) {
  return run_shell(dir, cat(mpirun(ranks), tapegrad_command(), " train ", args));
}

/// A small model on the majority task, one thread per rank, a fixed seed.
std::string small_run(const std::string& out, int64_t batch, int64_t steps, int64_t eval_every) {
  return cat("--task majority --symbols 6 --min-len 4 --max-len 12 --d-model 16 --heads 2 --ff 32 --threads 1 --seed 3",
             " --batch-size ", batch, " --steps ", steps, " --eval-every ", eval_every, " --out ", quote(out));
}

std::vector<std::pair<std::string, Tensor>> weights(const std::string& run) {
  return load_safetensors(run + "/model.safetensors").tensors;
}

/// |a - b| / |moved - start| over every weight: how far two runs ended apart, against how far training
/// moved the weights.
double relative_distance(const std::string& a, const std::string& b, const std::string& start,
                         const std::string& moved) {
  const auto wa = weights(a), wb = weights(b), w0 = weights(start), w1 = weights(moved);
  REQUIRE(wa.size() == wb.size());
  double apart = 0, travelled = 0;
  for (size_t i = 0; i < wa.size(); ++i) {
    const std::vector<double> x = wa[i].second.to_vector(), y = wb[i].second.to_vector();
    const std::vector<double> s = w0[i].second.to_vector(), e = w1[i].second.to_vector();
    for (size_t k = 0; k < x.size(); ++k) {
      apart += (x[k] - y[k]) * (x[k] - y[k]);
      travelled += (e[k] - s[k]) * (e[k] - s[k]);
    }
  }
  REQUIRE(travelled > 0);
  return std::sqrt(apart / travelled);
}

json last_json_line(const Result& r) {
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(!lines.empty());
  return json::parse(lines.back());
}

/// Lines of text that start with `start`.
int lines_starting(const std::string& text, const std::string& start) {
  int n = 0;
  for (const std::string& line : lines_of(text)) n += line.rfind(start, 0) == 0;
  return n;
}

/// What a set-up refused by the ranks leaves: a non-zero exit, and exactly one line of tapegrad's naming
/// the problem (mpirun adds a box of its own about the exit code, which users see too).
void require_one_tapegrad_error(const Result& r, const std::string& mentions) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code > 0);
  CHECK(r.out.empty());
  CHECK(lines_starting(r.err, "tapegrad") == 1);
  CHECK_THAT(r.err, Catch::Contains(mentions));
  for (const char* crash : {"terminate called", "Segmentation", "Aborted", "MPI_ABORT"})
    CHECK_THAT(r.err, !Catch::Contains(crash));
}

/// `mpirun -np N tapegrad train <args>` in the background: its output goes to a log, and its exit status
/// to a file once it ends.
struct BackgroundRun {
  std::string out, log, status;

  BackgroundRun(const TempDir& dir, int ranks, const std::string& args, const std::string& out_dir)
      : out(out_dir), log(dir / "mpirun.log"), status(dir / "status") {
    run_shell(dir, cat("(", mpirun(ranks), tapegrad_command(), " train ", args, " >", quote(log), " 2>&1; echo $? >",
                       quote(status + ".tmp"), " && mv ", quote(status + ".tmp"), " ", quote(status), ") & true"));
  }
  /// Waits (60 s at most) until the run has published a checkpoint, then a moment more: somewhere in a step.
  void wait_for_checkpoint() const {
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (!fs::exists(out + "/latest") && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    REQUIRE(fs::exists(out + "/latest"));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  /// The process of this run whose command line starts with `program` and, when rank >= 0, whose environment
  /// names that rank (OMPI_COMM_WORLD_RANK, set by mpirun).
  pid_t find(const std::string& program, int rank) const {
    for (const auto& entry : fs::directory_iterator("/proc")) {
      const std::string cmdline = read_file(entry.path().string() + "/cmdline");
      const std::string environ = read_file(entry.path().string() + "/environ");
      if (cmdline.rfind(program + '\0', 0) == 0 && cmdline.find(out) != std::string::npos &&
          (rank < 0 || environ.find(cat("OMPI_COMM_WORLD_RANK=", rank, '\0')) != std::string::npos))
        return static_cast<pid_t>(std::stol(entry.path().filename().string()));
    }
    return 0;
  }
  pid_t rank_pid(int rank) const { return find(TAPEGRAD_CLI, rank); }
  pid_t mpirun_pid() const { return find(TAPEGRAD_MPIEXEC, -1); }
  /// Seconds from `since` until mpirun ended (it must, within 60 s); its exit status in *exit_status.
  double seconds_to_end(Clock::time_point since, int* exit_status) const {
    while (!fs::exists(status) && Clock::now() < since + std::chrono::seconds(60))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const double seconds = std::chrono::duration<double>(Clock::now() - since).count();
    REQUIRE(fs::exists(status));
    *exit_status = std::stoi(read_file(status));
    return seconds;
  }
};

}  // namespace

TEST_CASE("mpi: 2 ranks train to the target, only rank 0 logs and writes, and the log gives the step's batch") {
  TempDir dir("tapegrad_test_mpi_train");
  const std::string out = dir / "run";
  const Result r =
      train_on(dir, 2, cat("--task majority --target-acc 0.99 --steps 1000 --out ", quote(out), " --json"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("(batch 64 per rank x 2 ranks = 128 per step"));
  CHECK(lines_starting(r.err, "training ") == 1);  // one log, rank 0's
  CHECK(lines_starting(r.err, "reached the target") == 1);
  const json summary = last_json_line(r);
  CHECK(summary.at("ranks") == 2);
  CHECK(summary.at("global_batch") == 128);
  CHECK(summary.at("reached_target") == true);
  CHECK(summary.at("best_valid_accuracy").get<double>() >= 0.99);
  const json state = json::parse(read_file(out + "/trainer.json"));
  CHECK(state.at("ranks") == 2);
  CHECK(state.at("rng").at("dropout_ranks").size() == 1);
  for (const auto& entry : fs::directory_iterator(out))  // rank 0's probe of the shared directory is gone
    CHECK(entry.path().filename().string().rfind(".tapegrad-rank0-", 0) == std::string::npos);
  const Result predicted = run_cli(dir, cat("predict --checkpoint ", quote(out), " --text 't1 t1 t1 t2'"));
  INFO(predicted.err);
  CHECK(predicted.exit_code == 0);
  CHECK(predicted.out.rfind("t1\t", 0) == 0);
}

TEST_CASE("mpi: exact reduction: N ranks x batch b are one rank x batch N·b within the stated tolerance") {
  TempDir dir("tapegrad_test_mpi_exact");
  const auto one = [&](const std::string& out, const std::string& args) {
    const Result r = run_cli(dir, cat("train ", args, " --out ", quote(out)));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  };
  const auto ranks = [&](int n, const std::string& out, const std::string& args) {
    const Result r = train_on(dir, n, cat(args, " --exact-reduction --out ", quote(out)));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  };
  const std::string model =
      "--task majority --symbols 6 --min-len 4 --max-len 12 --d-model 16 --heads 2 --ff 32 --threads 1 --seed 3";
  // One process x batch b, then 2 and 4 ranks x b / N with --exact-reduction, from the same initial weights
  // (one step at learning rate 0 leaves them where they started): the ranks' weights must end within
  // `tolerance` of the one process's, relative to how far it moved them.
  const auto compare = [&](const std::string& name, const std::string& setup, int64_t batch,
                           const std::string& training, double tolerance) {
    const std::string start = dir / (name + "_start"), alone = dir / (name + "_one");
    one(start, cat(setup, " --batch-size ", batch, " --steps 1 --eval-every 1 --lr 0"));
    one(alone, cat(setup, " --batch-size ", batch, training));
    for (int n : {2, 4}) {
      const std::string together = dir / cat(name, "_", n);
      ranks(n, together, cat(setup, " --batch-size ", batch / n, training));
      const double d = relative_distance(alone, together, start, alone);
      UNSCOPED_INFO(name << ", " << n << " ranks: relative distance " << d);
      CHECK(d < tolerance);
    }
  };

  SECTION("SGD, one step: the weights move by the gradient, so this is the gradients' difference") {
    // docs/distributed.md: measured 9.3e-7 and 1.0e-6 (float32 sums in another order)
    compare("sgd", cat(model, " --optimizer sgd --momentum 0"), 64, " --lr 0.1 --steps 1 --eval-every 1", 1e-5);
  }
  SECTION("AdamW, 5 steps, and the same command twice gives the same bytes") {
    // measured 4.3e-4 and 5.3e-4: Adam divides by |g|, so it amplifies rounding where g is near 0
    compare("adamw", model, 64, " --steps 5 --eval-every 5", 3e-3);
    ranks(4, dir / "again", cat(model, " --batch-size 16 --steps 5 --eval-every 5"));
    CHECK(read_file(dir / "again/model.safetensors") == read_file(dir / "adamw_4/model.safetensors"));
    // Each number is added in rank order whatever the buckets: one buffer after backward gives the same bytes.
    ranks(4, dir / "one_buffer", cat(model, " --batch-size 16 --steps 5 --eval-every 5 --no-overlap"));
    CHECK(read_file(dir / "one_buffer/model.safetensors") == read_file(dir / "adamw_4/model.safetensors"));
  }
  SECTION("a language model (--task lm): the ranks share each step's random windows") {
    std::string text;
    for (int i = 0; i < 80; ++i) text += cat("the fox ", i % 7, " jumps over the lazy dog.\n");
    const std::string corpus = dir.file("corpus.txt", text);
    compare("lm",
            cat("--task lm --data ", quote(corpus), " --context-length 16 --d-model 16 --heads 2 --ff 32 --threads 1 ",
                "--seed 3 --optimizer sgd --momentum 0"),
            16, " --lr 0.1 --steps 1 --eval-every 1", 1e-5);
  }
  SECTION("a TSV in epochs, its last batch split unevenly: every example once per epoch, weighted by its share") {
    // 90 training examples (100 lines, 10 held out) in batches of 24: the fourth batch of each epoch has
    // 18, which 4 ranks share as 5, 5, 4, 4.
    const std::string data = dir.file("train.tsv", keyword_tsv(100, 2));
    compare("tsv",
            cat("--data ", quote(data), " --context-length 8 --d-model 16 --heads 2 --ff 32 --threads 1 --seed 3 ",
                "--optimizer sgd --momentum 0"),
            24, " --lr 0.1 --epochs 2 --eval-every 8", 1e-5);  // measured 5.8e-7 and 5.3e-7
    for (int n : {2, 4}) CHECK(json::parse(read_file(dir / cat("tsv_", n) + "/trainer.json")).at("step") == 8);
  }
}

TEST_CASE("mpi: resumed on the same ranks it is bit-identical to a run never stopped, and on other ranks it goes on") {
  TempDir dir("tapegrad_test_mpi_resume");
  const std::string straight = dir / "straight", stopped = dir / "stopped";
  for (const auto& [out, steps] : {std::pair{straight, 40}, {stopped, 20}}) {
    const Result r = train_on(dir, 2, small_run(out, 16, steps, 10));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  Result r = train_on(dir, 2, cat("--resume ", quote(stopped), " --steps 40"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("at step 20 of 40 on 2 ranks (saved by 2 ranks; batch 32 per step)"));
  CHECK(read_file(stopped + "/model.safetensors") == read_file(straight + "/model.safetensors"));
  CHECK(read_file(stopped + "/optimizer.safetensors") == read_file(straight + "/optimizer.safetensors"));

  r = train_on(dir, 4, cat("--resume ", quote(stopped), " --steps 50"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("at step 40 of 50 on 4 ranks (saved by 2 ranks; batch 64 per step)"));
  r = run_cli(dir, cat("train --resume ", quote(stopped), " --steps 60"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("at step 50 of 60 on 1 rank (saved by 4 ranks; batch 16 per step)"));
}

TEST_CASE(
    "mpi: a rank killed with SIGKILL stops the others within seconds, and its checkpoint resumes on 4 ranks and on 1") {
  TempDir dir("tapegrad_test_mpi_kill");
  const std::string out = dir / "run";
  const BackgroundRun run(dir, 2, small_run(out, 16, 1000000, 20), out);
  run.wait_for_checkpoint();
  const pid_t rank1 = run.rank_pid(1);
  REQUIRE(rank1 > 0);
  const auto killed = Clock::now();
  REQUIRE(::kill(rank1, SIGKILL) == 0);
  int exit_status = 0;
  const double seconds = run.seconds_to_end(killed, &exit_status);
  const std::string said = read_file(run.log);
  INFO(said);
  CHECK(seconds < 15);
  CHECK(exit_status != 0);
  CHECK_THAT(said, Catch::Contains("rank 1") && Catch::Contains("signal 9"));
  // Whatever rank 0 was doing, the published checkpoint is whole: it predicts and resumes.
  const int64_t saved = json::parse(read_file(out + "/trainer.json")).at("step").get<int64_t>();
  CHECK(saved % 20 == 0);
  Result r = run_cli(dir, cat("predict --checkpoint ", quote(out), " --text 't1 t1 t2'"));
  INFO(r.err);
  CHECK(r.exit_code == 0);
  r = train_on(dir, 4, cat("--resume ", quote(out), " --steps ", saved + 20));
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains(cat("resuming ", out, " at step ", saved)));
  r = run_cli(dir, cat("train --resume ", quote(out), " --steps ", saved + 40));
  INFO(r.err);
  CHECK(r.exit_code == 0);
}

TEST_CASE("mpi: ranks with other flags, other data or no shared run directory are refused in one message") {
  TempDir dir("tapegrad_test_mpi_setups");
  const std::string mpmd = mpirun(1);  // "-np 1 A : -np 1 B" starts one rank of each command
  const auto two_commands = [&](const std::string& first, const std::string& second) {
    return run_shell(dir, cat(mpmd, first, " : -np 1 ", second));
  };
  const std::string train = cat(tapegrad_command(), " train ");
  const std::string run = small_run(dir / "run", 16, 10, 10);

  SECTION("another learning rate on rank 1") {
    const Result r = two_commands(cat(train, run, " --lr 0.01"), cat(train, run, " --lr 0.02"));
    require_one_tapegrad_error(r, "rank 1 (on ");
    CHECK_THAT(r.err, Catch::Contains(
                          "was started with other settings than rank 0: options/lr is 0.02 there and 0.01 on rank 0"));
    CHECK_FALSE(fs::exists(dir / "run/trainer.json"));
  }
  SECTION("a flag value that only rank 1 refuses") {
    const Result r = two_commands(cat(train, run), cat(train, run, " --lr -1"));
    require_one_tapegrad_error(r, "rank 1 (on ");
    CHECK_THAT(r.err, Catch::Contains("--lr must be"));
  }
  SECTION("the same file name holding other examples on rank 1") {
    fs::create_directories(dir / "a");
    fs::create_directories(dir / "b");
    dir.file("a/train.tsv", keyword_tsv(100, 1));
    dir.file("b/train.tsv", keyword_tsv(100, 2));
    const std::string args = cat(" train --data train.tsv --context-length 8 --steps 5 --out ", quote(dir / "run"));
    const Result r = run_shell(dir, cat(mpmd, "-wdir ", quote(dir / "a"), " ", tapegrad_command(), args,
                                        " : -np 1 -wdir ", quote(dir / "b"), " ", tapegrad_command(), args));
    require_one_tapegrad_error(r, "read other examples than rank 0 (data/fingerprint");
  }
  SECTION("a run directory that rank 1 does not see") {
    fs::create_directories(dir / "a");
    fs::create_directories(dir / "b");
    const std::string args = cat(train, small_run("run", 16, 10, 10));
    const Result r = run_shell(
        dir, cat(mpmd, "-wdir ", quote(dir / "a"), " ", args, " : -np 1 -wdir ", quote(dir / "b"), " ", args));
    require_one_tapegrad_error(r, "does not see the run directory run that rank 0 writes (");
    CHECK_THAT(r.err, Catch::Contains("a/run on "));
  }
  SECTION("another subcommand under mpirun, and mpirun's flags without mpirun") {
    Result r = run_shell(dir, cat(mpirun(2), tapegrad_command(), " gradcheck"));
    require_one_tapegrad_error(r, "only `tapegrad train` runs on several");
    r = run_cli(dir, cat("train ", run, " --exact-reduction"));
    require_one_tapegrad_error(r, "--exact-reduction applies to data-parallel training only: mpirun -np N");
  }
}

TEST_CASE("mpi: Ctrl-C (SIGINT to mpirun) stops every rank after the same step, with that step's checkpoint") {
  TempDir dir("tapegrad_test_mpi_interrupt");
  const std::string out = dir / "run";
  const BackgroundRun run(dir, 2, small_run(out, 16, 1000000, 50), out);
  run.wait_for_checkpoint();
  const pid_t mpirun_pid = run.mpirun_pid();  // mpirun itself, not the `timeout` that runs it
  REQUIRE(mpirun_pid > 0);
  REQUIRE(::kill(mpirun_pid, SIGINT) == 0);
  int exit_status = 0;
  run.seconds_to_end(Clock::now(), &exit_status);
  const std::string said = read_file(run.log);
  INFO(said);
  const std::smatch stop = [&] {
    std::smatch m;
    std::regex_search(said, m,
                      std::regex("interrupted by SIG[A-Z]+ at step ([0-9]+): checkpoint saved; continue with: "
                                 "mpirun -np 2 \\S+ train --resume "));
    return m;
  }();
  REQUIRE(!stop.empty());
  CHECK(lines_starting(said, "interrupted by") == 1);  // rank 0 says it for all
  CHECK(json::parse(read_file(out + "/trainer.json")).at("step").get<int64_t>() == std::stoll(stop[1].str()));
  const Result r = train_on(dir, 2, cat("--resume ", quote(out), " --steps ", std::stoll(stop[1].str()) + 10));
  INFO(r.err);
  CHECK(r.exit_code == 0);
}

TEST_CASE("mpi: a rank that hangs (SIGSTOP) stops the others after --comm-timeout, naming the checkpoint kept") {
  TempDir dir("tapegrad_test_mpi_hang");
  const std::string out = dir / "run";
  const BackgroundRun run(dir, 2, cat(small_run(out, 16, 1000000, 20), " --comm-timeout 3"), out);
  run.wait_for_checkpoint();
  const pid_t rank1 = run.rank_pid(1);
  REQUIRE(rank1 > 0);
  const auto stopped = Clock::now();
  REQUIRE(::kill(rank1, SIGSTOP) == 0);
  int exit_status = 0;
  const double seconds = run.seconds_to_end(stopped, &exit_status);
  const std::string said = read_file(run.log);
  INFO(said);
  CHECK(seconds >= 3);
  CHECK(seconds < 20);
  CHECK(exit_status != 0);
  CHECK_THAT(said, Catch::Contains("tapegrad train: rank 0 (on ") &&
                       Catch::Contains("no answer from the other ranks for 3 s while") &&
                       Catch::Contains("is intact: continue with mpirun -np 2 ") && Catch::Contains(" train --resume "));
  const Result r = train_on(dir, 2,
                            cat("--resume ", quote(out), " --steps ",
                                json::parse(read_file(out + "/trainer.json")).at("step").get<int64_t>() + 10));
  INFO(r.err);
  CHECK(r.exit_code == 0);
}
