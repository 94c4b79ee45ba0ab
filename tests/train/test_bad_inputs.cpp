// The command line says no instead of guessing: every bad value, every flag that would have no effect in
// the chosen mode, and every data set that cannot make a classifier gets one line on stderr naming the
// flag or file and what is wrong, a non-zero exit, and no work done. Each row is one bad input of the
// table in docs/reliability.md (the last test checks that the table lists every row by name).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>

#include "support/bad_input.h"
#include "support/temp_dir.h"

using namespace tapegrad;
using testing::TempDir;
using namespace testing;
namespace fs = std::filesystem;

namespace {

std::vector<BadInput> bad_values(const std::string& out) {
  return {{
      {"no subcommand", "", "subcommand"},
      {"unknown subcommand", "frobnicate", "subcommand"},
      {"unknown flag", "train --bogus" + out, "--bogus"},
      {"a word where a number belongs", "train --lr abc" + out, "--lr"},
      {"a fraction where an integer belongs", "train --steps 1.5" + out, "--steps"},
      {"zero steps", "train --steps 0" + out, "--steps must be positive"},
      {"negative steps", "train --steps -5" + out, "--steps must be positive"},
      {"zero epochs", "train --train-size 100 --epochs 0" + out, "--epochs must be positive"},
      {"NaN learning rate", "train --lr nan" + out, "--lr must be a finite number >= 0"},
      {"infinite learning rate", "train --lr inf" + out, "--lr must be a finite number >= 0"},
      {"negative learning rate", "train --lr -0.1" + out, "--lr must be a finite number >= 0"},
      {"negative weight decay", "train --weight-decay -1" + out, "--weight-decay"},
      {"momentum of 1", "train --optimizer sgd --momentum 1" + out, "--momentum must be in [0, 1)"},
      {"dropout of 1", "train --dropout 1" + out, "--dropout must be in [0, 1)"},
      {"negative dropout", "train --dropout -0.1" + out, "--dropout must be in [0, 1)"},
      {"validation fraction 0", "train --data x.tsv --valid-fraction 0" + out, "--valid-fraction must be in (0, 1)"},
      {"validation fraction 1", "train --data x.tsv --valid-fraction 1" + out, "--valid-fraction must be in (0, 1)"},
      {"target accuracy above 1", "train --target-acc 5" + out, "--target-acc"},
      {"NaN target accuracy", "train --target-acc nan" + out, "--target-acc"},
      {"NaN gradient clip", "train --clip-grad nan" + out, "--clip-grad"},
      {"zero batch size", "train --batch-size 0" + out, "--batch-size must be positive"},
      {"zero validation interval", "train --eval-every 0" + out, "--eval-every must be positive"},
      {"negative warm-up", "train --warmup -1" + out, "--warmup"},
      {"negative threads", "train --threads -1" + out, "--threads"},
      {"negative training set size", "train --train-size -5" + out, "--train-size"},
      {"negative context length", "train --context-length -3" + out, "--context-length"},
      {"zero heads", "train --heads 0" + out, "--heads"},
      {"width not divisible by heads", "train --heads 3 --d-model 32" + out, "not divisible by --heads 3"},
      {"zero width", "train --d-model 0" + out, "--d-model"},
      {"a model too large for the machine", "train --d-model 65536 --ff 65536 --heads 1 --layers 64" + out,
       "this classifier needs about"},
      {"unknown optimizer", "train --optimizer foo" + out, "foo"},
      {"unknown task", "train --task sorting" + out, "--task: unknown task 'sorting'"},
      {"unknown schedule", "train --schedule wavy" + out, "wavy"},
      {"unknown activation", "train --activation tanh" + out, "tanh"},
      {"unknown pooling", "train --pool max" + out, "max"},
      {"task with one symbol", "train --symbols 1" + out, "--symbols 1 is outside [2, 65536]"},
      {"task lengths out of order", "train --min-len 5 --max-len 2" + out,
       "lengths need 1 <= --min-len <= --max-len <= 1048576, got --min-len 5 and --max-len 2"},
      {"eval without a checkpoint", "eval --task majority", "--checkpoint"},
      {"eval with neither --task nor --data", "eval --checkpoint x", "give --task or --data"},
      {"predict with an unknown flag", "predict --checkpoint x --text a --bogus", "--bogus"},
      {"gradcheck with an unknown flag", "gradcheck --bogus", "--bogus"},
  }};
}

std::vector<BadInput> flags_without_effect(const std::string& out, const std::string& data, const std::string& run) {
  return {{
      {"a task flag with --data", "train --data " + data + " --symbols 12" + out, "--symbols configures a built-in task"},
      {"--task with --data", "train --data " + data + " --task order" + out, "--task configures a built-in task"},
      {"--train-size with --data", "train --data " + data + " --train-size 10" + out, "--train-size"},
      {"--valid-fraction with --valid", "train --data " + data + " --valid " + data + " --valid-fraction 0.2" + out,
       "--valid-fraction splits --data"},
      {"--valid without --data", "train --valid " + data + out, "--valid needs --data"},
      {"--valid-fraction without --data", "train --valid-fraction 0.2" + out, "--valid-fraction needs --data"},
      {"--momentum with adamw", "train --momentum 0.5" + out, "--momentum applies to --optimizer sgd only"},
      {"--no-shuffle on a fresh task stream", "train --no-shuffle" + out, "--no-shuffle needs a fixed training set"},
      {"--epochs on a fresh task stream", "train --epochs 2" + out, "--epochs needs a fixed training set"},
      {"--experts without --ffn moe", "train --experts 8" + out, "--experts applies to --ffn moe only, not --ffn dense"},
      {"--top-k without --ffn moe", "train --top-k 1" + out, "--top-k applies to --ffn moe only"},
      {"--moe-aux-weight without --ffn moe", "train --moe-aux-weight 0.5" + out, "--moe-aux-weight applies to --ffn moe only"},
      {"--activation-checkpointing on with one layer", "train --layers 1 --activation-checkpointing on" + out,
       "--activation-checkpointing on has no effect with --layers 1"},
      {"--attention-eps without --attention linear", "train --attention-eps 1e-3" + out,
       "--attention-eps applies to --attention linear only, not --attention softmax"},
      {"a model flag with --init", "train --init " + run + " --data " + data + " --d-model 64" + out,
       "--d-model cannot change with --init"},
      {"a flag that changes what the model computes with --init", "train --init " + run + " --data " + data +
       " --temperature 2" + out, "--temperature cannot change with --init"},
      {"a norm's eps with --init", "train --init " + run + " --data " + data + " --norm-eps 1e-3" + out,
       "--norm-eps cannot change with --init: the model's shape and what it computes are the checkpoint's (only the "
       "training-only --dropout and --moe-aux-weight can)"},
      {"a NaN load-balancing weight with --init of a dense checkpoint", "train --init " + run + " --data " + data + " --moe-aux-weight nan" + out,
       "--moe-aux-weight applies to --ffn moe only, and the --init checkpoint"},
      {"--moe-aux-weight with --init of a checkpoint without moe", "train --init " + run + " --data " + data +
       " --moe-aux-weight 0.1" + out, "--moe-aux-weight applies to --ffn moe only, and the --init checkpoint"},
      {"--lr with --resume", "train --resume " + run + " --lr 0.1", "--lr cannot change when resuming"},
      {"--out with --resume", "train --resume " + run + out, "--out cannot change when resuming"},
      {"--seed with --resume", "train --resume " + run + " --seed 3", "--seed cannot change when resuming"},
      {"a model flag with --resume", "train --resume " + run + " --layers 4", "--layers cannot change when resuming"},
      {"fewer steps than done with --resume", "train --resume " + run + " --steps 10", "is not more than the 60 steps"},
      {"a task flag with eval --data", "eval --checkpoint " + run + " --data " + data + " --symbols 5",
       "--symbols configures a built-in task"},
  }};
}

// The strict number parser (train/cli/number_flags.h), empty paths, numbers whose products overflow,
// memory needed beyond the machine's, and the flags of bench and gradcheck.
std::vector<BadInput> numbers_and_sizes(const std::string& out) {
  return {{
      {"an integer with a leading zero", "train --batch-size 010" + out, "--batch-size: '010' is not a decimal integer"},
      {"a hexadecimal integer", "train --steps 0x10" + out, "--steps: '0x10' is not a decimal integer"},
      {"an integer with a sign '+'", "train --eval-every +5" + out, "--eval-every: '+5' is not a decimal integer"},
      {"an integer with a space", "train --steps ' 5'" + out, "--steps: ' 5' is not a decimal integer"},
      {"an integer with an exponent", "train --steps 1e3" + out, "--steps: '1e3' is not a decimal integer"},
      {"an empty integer", "train --steps ''" + out, "--steps: empty value"},
      {"an empty real", "train --lr ''" + out, "--lr: empty value"},
      {"a hexadecimal real", "train --lr 0x1p-3" + out, "--lr: '0x1p-3' is not a number"},
      {"a real with trailing junk", "train --dropout 0.1x" + out, "--dropout: '0.1x' is not a number"},
      {"a real beyond a double", "train --lr 1e999" + out, "--lr: 1e999 cannot be held by a double"},
      {"a real infinite in float32", "train --norm-eps 1e300" + out, "--norm-eps: 1e300 is infinite in float32"},
      {"a real that float32 holds as 0", "train --lr 1e-50" + out, "--lr: 1e-50 is 0 or a denormal in float32"},
      {"steps beyond 2^63 - 1", "train --steps 9223372036854775808" + out,
       "--steps: 9223372036854775808 is outside the range [-9223372036854775808, 9223372036854775807]"},
      {"threads beyond an int", "train --threads 2147483648" + out, "--threads: 2147483648 is outside the range"},
      {"a negative seed", "train --seed -5" + out, "--seed: -5 is outside the range [0, 18446744073709551615]"},
      {"a seed beyond 2^64 - 1", "train --seed 18446744073709551616" + out, "--seed: 18446744073709551616 is outside"},
      {"more steps than a double counts", "train --steps 9223372036854775807" + out,
       "--steps must be at most 9007199254740992"},
      {"a warm-up that overflows the schedule", "train --warmup 9223372036854775807" + out,
       "--warmup must be in [0, 9007199254740992]"},
      {"epochs whose steps overflow", "train --train-size 1000 --epochs 9007199254740992" + out,
       "--epochs 9007199254740992 x 16 steps an epoch"},
      {"an empty --resume", "train --resume ''", "--resume: empty path"},
      {"an empty --init", "train --init ''" + out, "--init: empty path"},
      {"an empty --out", "train --out ''", "--out: empty path"},
      {"an empty --data", "train --data ''" + out, "--data: empty path"},
      {"an empty --valid", "train --valid ''" + out, "--valid: empty path"},
      {"an empty eval --checkpoint", "eval --checkpoint '' --task majority", "--checkpoint: empty path"},
      {"an empty eval --data", "eval --checkpoint x --data ''", "--data: empty path"},
      {"an empty predict --checkpoint", "predict --checkpoint '' --text a", "--checkpoint: empty path"},
      {"an empty --attention-svg", "predict --checkpoint x --text a --attention-svg ''", "--attention-svg: empty path"},
      {"a training set too large for the machine", "train --train-size 1000000000000" + out,
       "the task's examples need about"},
      {"task sequences too long for the machine", "train --max-len 1048576" + out, "(or --max-len)"},
      {"a batch too large for the machine", "train --batch-size 1000000000000" + out, "this classifier needs about"},
      {"zero experts", "train --ffn moe --experts 0" + out, "--experts 0 is outside [1, 1024]"},
      {"more experts per token than experts", "train --ffn moe --experts 2 --top-k 3" + out,
       "--top-k 3 is outside [1, --experts 2]"},
      {"NaN load-balancing weight", "train --ffn moe --moe-aux-weight nan" + out, "--moe-aux-weight must be a finite"},
      // Each setting a component declares, out of its declared range, by its flag.
      {"zero experts per token", "train --ffn moe --top-k 0" + out, "--top-k 0 is outside [1, --experts 4]"},
      {"a negative load-balancing weight", "train --ffn moe --moe-aux-weight -1" + out,
       "--moe-aux-weight must be a finite number in [0, 100], got -1"},
      {"a zero temperature", "train --temperature 0" + out, "--temperature must be a finite number in [0.001, 1000], got 0"},
      {"a zero norm eps", "train --norm-eps 0" + out, "--norm-eps must be a finite number in (0, 1], got 0"},
      {"an infinite norm eps", "train --norm-eps inf" + out, "--norm-eps must be a finite number in (0, 1], got inf"},
      {"a zero linear attention eps", "train --attention linear --attention-eps 0" + out,
       "--attention-eps must be a finite number in (0, 1], got 0"},
      {"bench with a negative width", "bench --d-model -5", "--d-model must be in [1, 1048576], got -5"},
      {"bench with negative threads", "bench --threads -1", "--threads must be in [0, 1024]"},
      {"bench with 5000 threads", "bench --threads 5000", "--threads must be in [0, 1024]"},
      {"bench with zero heads", "bench --heads 0", "--heads must be in [1, "},
      {"bench with a width not divisible by heads", "bench --heads 3", "--d-model 64 is not divisible by --heads 3"},
      {"bench with zero feed-forward width", "bench --ff 0", "--ff must be in [1, "},
      {"bench with zero feed-forward width by its older name", "bench --d-ff 0", "--ff must be in [1, "},
      {"bench with negative layers", "bench --layers -1", "--layers must be in [0, 1024]"},
      {"bench with a short sequence", "bench --context-length 2", "--context-length must be in [4, "},
      {"bench with a short sequence by its older name", "bench --seq 2", "--context-length must be in [4, "},
      {"bench with zero batch", "bench --batch-size 0", "--batch-size must be >= 1"},
      {"bench with zero batch by its older name", "bench --batch 0", "--batch-size must be >= 1"},
      {"bench with negative warm-up", "bench --warmup -1", "--warmup must be >= 0"},
      {"bench with zero steps", "bench --steps 0", "--steps must be >= 1"},
      {"bench with an octal-looking width", "bench --d-model 010", "--d-model: '010' is not a decimal integer"},
      {"bench with a model too large for the machine", "bench --d-model 1048576 --ff 1048576",
       "this classifier needs about"},
      {"bench with an unknown configuration after a good one", "bench --config small,huge",
       "--config: unknown configuration 'huge' (registered: small, medium, long or lm)"},
      {"gradcheck with a filter matching no case", "gradcheck --filter no-such-case",
       "--filter 'no-such-case' matches none of the"},
  }};
}

// Run under `ulimit -v 2000000` (1.9 GiB of address space): the limit counts as the machine's memory.
std::vector<BadInput> under_an_address_space_limit(const std::string& out) {
  return {{
      {"a training set beyond ulimit -v", "train --train-size 20000000" + out,
       "of address space left (ulimit -v 1.9 GiB, of which"},
      {"a model beyond ulimit -v", "train --d-model 4096 --ff 4096 --heads 1" + out,
       "this classifier needs about 4.5 GiB to train"},
      {"a bench model beyond ulimit -v", "bench --config small --d-model 4096 --ff 8192 --heads 1",
       "lower --batch-size, --context-length, --d-model, --ff or --layers"},
  }};
}

std::vector<BadInput> out_is_a_file(const std::string& file) {
  return {{"--out naming a file", "train --steps 5 --out " + file, "is a file"}};
}

std::vector<BadInput> cannot_classify(const std::string& out, const std::string& one_label, const std::string& one_line,
                                      const std::string& train, const std::string& unseen) {
  return {
      {"a single label", "train --data " + one_label + out, "a classifier needs at least two classes"},
      {"one example: nothing left after the split", "train --data " + one_line + " --valid-fraction 0.5" + out,
       "no training examples left"},
      {"a validation label never seen in training", "train --data " + train + " --valid " + unseen + out,
       "validation label 'meh' does not occur in the training data"},
  };
}

std::vector<BadInput> resume_other_data(const std::string& run, const std::string& other) {
  return {
      {"--resume of a run whose data came from a pipe", "train --resume " + run + " --steps 30", "from a pipe"},
      {"--resume with other data", "train --resume " + run + " --data " + other + " --steps 30",
       "holds other examples than the run started with"},
  };
}

}  // namespace

TEST_CASE("bad inputs: command-line values out of range are refused before any work") {
  TempDir dir("tapegrad_test_bad_inputs");
  require_refused(dir, bad_values(" --out " + quote(dir / "run")));
  CHECK(!fs::exists(dir / "run"));  // nothing was created: the checks come before any work
}

TEST_CASE("bad inputs: numbers, empty paths, sizes beyond the machine and bench's flags are refused by name") {
  TempDir dir("tapegrad_test_bad_inputs");
  require_refused(dir, numbers_and_sizes(" --out " + quote(dir / "run")));
#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer reserves terabytes of shadow memory: ulimit -v stops it at start
  for (const BadInput& c : under_an_address_space_limit(" --out " + quote(dir / "run"))) {
    INFO(c.name << ": ulimit -v 2000000; tapegrad " << c.args);
    require_one_line_error(run_shell(dir, cat("ulimit -v 2000000 && timeout 60 ", tapegrad_command(), " ", c.args)),
                           c.mentions);
  }
#endif
  CHECK(!fs::exists(dir / "run"));
}

namespace {

/// The numeric flags of a subcommand, from its --help: CLI11 prints each option's type (INT, UINT, FLOAT)
/// there, whichever way the option was added, so a flag that bypasses the strict parser is listed too.
std::vector<std::pair<std::string, std::string>> numeric_flags(const TempDir& dir, const std::string& command) {
  const Result help = run_cli(dir, command + " --help");
  REQUIRE(help.exit_code == 0);
  static const std::regex option(R"(^\s+(?:-\w,)?(--[\w-]+)\s+(INT|UINT|FLOAT)\b)");
  std::vector<std::pair<std::string, std::string>> flags;
  for (const std::string& line : lines_of(help.out))
    if (std::smatch m; std::regex_search(line, m, option)) flags.emplace_back(m[1], m[2]);
  return flags;
}

/// The subcommands, from the top-level --help.
std::vector<std::string> subcommands(const TempDir& dir) {
  const Result help = run_cli(dir, "--help");
  REQUIRE(help.exit_code == 0);
  std::vector<std::string> names;
  bool listed = false;
  for (const std::string& line : lines_of(help.out)) {
    if (line.rfind("Subcommands:", 0) == 0) listed = true;
    else if (std::smatch m; listed && std::regex_search(line, m, std::regex(R"(^\s+([a-z]+)\s)"))) names.push_back(m[1]);
  }
  return names;
}

}  // namespace

TEST_CASE("bad inputs: every numeric flag of every subcommand refuses malformed numbers, and every real one what float32 cannot hold, by name") {
  TempDir dir("tapegrad_test_bad_inputs");
  const std::string out = " --out " + quote(dir / "run");
  // Each is refused by the strict parser whatever the flag's range: CLI11's own conversion would read
  // "010" as 8, "0x10" as 16, "" as 0, " 1" as 1 and wrap or clamp the overflows.
  const std::vector<std::string> bad_integers = {"010", "0x10", "", "1x", " 1", "1 ", "+1", "1.5", "1e3", "-0",
                                                 "99999999999999999999999", "-99999999999999999999999"};
  const std::vector<std::string> bad_reals = {"", "1x", " 1", "1 ", "+1", "0x1p3", "1,5", "1e999", "-1e999", "one"};
  // Numbers a double holds and float32, in which models compute, does not: infinite there, or 0.
  const std::vector<std::string> beyond_float32 = {"1e300", "-3.5e38", "1e-300", "-1e-39"};
  const std::vector<std::string> commands = subcommands(dir);
  REQUIRE(commands.size() >= 5);
  size_t checked = 0;
  for (const std::string& command : commands) {
    for (const auto& [flag, type] : numeric_flags(dir, command)) {
      const bool real = type == "FLOAT";
      for (const std::string& value : real ? bad_reals : bad_integers) {
        INFO("tapegrad " << command << " " << flag << " " << quote(value));
        const Result r = run_cli(dir, cat(command, " ", flag, " ", quote(value), command == "train" ? out : ""));
        require_one_line_error(r, flag + ": ");
        CHECK(r.exit_code == 2);  // refused while parsing, before any subcommand ran
      }
      for (const std::string& value : real ? beyond_float32 : std::vector<std::string>{}) {
        INFO("tapegrad " << command << " " << flag << " " << value);
        const Result r = run_cli(dir, cat(command, " ", flag, " ", value, command == "train" ? out : ""));
        require_one_line_error(r, cat(flag, ": ", value, " is "));
        CHECK_THAT(r.err, Catch::Contains("in float32"));
        CHECK(r.exit_code == 2);
      }
      if (type == "UINT") {  // negative is out of range, not wrapped to 2^64 - 5
        INFO("tapegrad " << command << " " << flag << " -5");
        require_one_line_error(run_cli(dir, cat(command, " ", flag, " -5", command == "train" ? out : "")),
                               flag + ": -5 is outside the range [0, 18446744073709551615]");
      }
      if (real && command == "train")  // "nan" and "inf" are numbers to the parser: the range rules name them
        for (const char* value : {"nan", "inf", "-inf"}) {
          INFO("tapegrad train " << flag << " " << value);
          require_one_line_error(run_cli(dir, cat("train ", flag, " ", value, out)), flag);
        }
      ++checked;
    }
  }
  CHECK(checked >= 40);  // train, eval and bench have that many between them: the --help reading works
  CHECK(!fs::exists(dir / "run"));
}

TEST_CASE("bad inputs: the strict parser accepts the numbers it documents, and a seed above 2^63 resumes") {
  TempDir dir("tapegrad_test_bad_inputs");
  const std::string run = dir / "run";
  const Result trained = run_cli(dir, cat("train --seed 18446744073709551615 --lr 5e-3 --weight-decay 0 --dropout .1 "
                                          "--temperature 1. --steps 4 --eval-every 2 --out ", quote(run)));
  INFO(trained.err);
  REQUIRE(trained.exit_code == 0);
  CHECK_THAT(read_file(run + "/trainer.json"), Catch::Contains("18446744073709551615"));
  const Result resumed = run_cli(dir, cat("train --resume ", quote(run), " --steps 6"));
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
  const Result listed = run_cli(dir, "gradcheck --list --filter softmax");
  CHECK(listed.exit_code == 0);
  CHECK(!lines_of(listed.out).empty());
  for (const std::string& name : lines_of(listed.out)) CHECK_THAT(name, Catch::Contains("softmax"));
}

TEST_CASE("bad inputs: --out naming a file is refused and the file is left alone") {
  TempDir dir("tapegrad_test_bad_inputs");
  const std::string file = dir.file("notes.txt", "my notes\n");
  require_refused(dir, out_is_a_file(quote(file)));
  CHECK(read_file(file) == "my notes\n");
}

TEST_CASE("bad inputs: a flag that would have no effect in the chosen mode is refused by name") {
  TempDir dir("tapegrad_test_bad_inputs");
  const std::string run = train_keyword_model(dir);  // 60 steps on train.tsv into dir/run
  const std::string before = read_file(run + "/model.safetensors");
  require_refused(dir, flags_without_effect(" --out " + quote(dir / "other"), quote(dir / "train.tsv"), quote(run)));
  CHECK(!fs::exists(dir / "other"));
  CHECK(read_file(run + "/model.safetensors") == before);  // the refused resumes changed nothing
}

TEST_CASE("bad inputs: data that cannot make a classifier is refused with the reason") {
  TempDir dir("tapegrad_test_bad_inputs");
  const std::string out = " --out " + quote(dir / "run");
  const std::string one_label = quote(dir.file("one_label.tsv", "pos\tgood film\npos\tnice film\npos\tfine film\n"));
  const std::string one_line = quote(dir.file("one_line.tsv", "pos\tgood film\n"));
  const std::string train = quote(dir.file("train.tsv", keyword_tsv(40, 2)));
  const std::string unseen = quote(dir.file("unseen.tsv", "pos\tgood film\nmeh\tso so\n"));
  require_refused(dir, cannot_classify(out, one_label, one_line, train, unseen));
  CHECK(!fs::exists(dir / "run"));
}

TEST_CASE("bad inputs: data from a pipe is read once, and --resume takes the same data again or refuses") {
  TempDir dir("tapegrad_test_bad_inputs");
  const std::string data = dir.file("train.tsv", keyword_tsv(200, 1)), fifo = dir / "data.fifo", run = dir / "run";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // One writer: a second open of the pipe by tapegrad would find no writer and hang (and time out).
  const Result trained =
      run_shell(dir, cat("timeout 60 cat ", quote(data), " > ", quote(fifo), " & timeout -k 5 120 ", tapegrad_command(),
                         " train --data ", quote(fifo), " --context-length 8 --steps 20 --eval-every 10 --out ", quote(run)));
  INFO(trained.err);
  REQUIRE(trained.exit_code == 0);
  // The suggested predict command (a validation text already in memory: the pipe is not read again)
  // runs as printed, quoting and all.
  const size_t hint = trained.err.find("try: ");
  REQUIRE(hint != std::string::npos);
  const std::string suggested = trained.err.substr(hint + 5, trained.err.find('\n', hint) - hint - 5);
  const Result predicted = run_shell(dir, suggested);
  INFO(suggested << "\n" << predicted.err);
  CHECK(predicted.exit_code == 0);
  CHECK(lines_of(predicted.out).size() == 1);

  const std::string other = quote(dir.file("other.tsv", keyword_tsv(200, 7)));
  require_refused(dir, resume_other_data(quote(run), other));
  const Result resumed = run_cli(dir, "train --resume " + quote(run) + " --data " + quote(data) + " --steps 30 --json");
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
}

TEST_CASE("bad inputs: docs/reliability.md lists every command-line row of this file") {
  std::vector<BadInput> rows = bad_values("");
  for (const auto& table : {flags_without_effect("", "", ""), numbers_and_sizes(""), under_an_address_space_limit(""),
                            out_is_a_file(""),
                            cannot_classify("", "", "", "", ""), resume_other_data("", "")})
    rows.insert(rows.end(), table.begin(), table.end());
  require_documented(rows);
}
