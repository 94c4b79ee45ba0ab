#pragma once
// Running the real `tapegrad` binary from a test: a process with its own stdin, stdout and stderr, and the
// failure contract every bad input must meet (one line on stderr naming the problem, a non-zero exit).
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "autograd/random.h"
#include "support/temp_dir.h"

namespace tapegrad::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// A shell word that stays one argument whatever it contains.
inline std::string quote(const std::string& word) {
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

struct Result {
  int exit_code = -1;  // the exit status; -1 when a signal ended the process (or it could not start)
  int signal = 0;      // the signal that ended it, if one did
  std::string out, err;
};

/// Runs a shell command line with stdin from `input`, capturing stdout and stderr separately.
inline Result run_shell(const TempDir& dir, const std::string& command_line, const std::string& input = "") {
  const std::string in = dir.file("stdin.txt", input), out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string command = cat("{ ", command_line, "; } <", quote(in), " >", quote(out), " 2>", quote(err));
  const int status = std::system(command.c_str());
  Result r;
  r.out = read_file(out);
  r.err = read_file(err);
  if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) <= 128) {
    r.exit_code = WEXITSTATUS(status);
  } else if (status != -1 && WIFEXITED(status)) {
    r.signal = WEXITSTATUS(status) - 128;  // a shell that did not exec the command reports 128 + signal
  } else if (status != -1 && WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  return r;
}

/// The binary under test, as a shell word.
inline std::string tapegrad_command() { return quote(TAPEGRAD_CLI); }

/// Runs `tapegrad <args>` (args already shell-quoted where needed); a run that hangs is killed after
/// ten minutes (timeout's exit code 124 then fails the test) instead of hanging the suite.
inline Result run_cli(const TempDir& dir, const std::string& args, const std::string& input = "") {
  return run_shell(dir, cat("timeout -k 10 600 ", tapegrad_command(), " ", args), input);
}

/// The failure contract: exactly one line on stderr, "tapegrad..." (naming what is wrong), nothing on
/// stdout, a non-zero exit that is not a signal, and no trace of an uncaught exception.
inline void require_one_line_error(const Result& r, const std::string& mentions) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.signal == 0);
  CHECK(r.exit_code > 0);
  CHECK(r.out.empty());
  REQUIRE(!r.err.empty());
  CHECK(r.err.back() == '\n');
  CHECK(lines_of(r.err).size() == 1);
  CHECK(r.err.rfind("tapegrad", 0) == 0);
  CHECK_THAT(r.err, Catch::Contains(mentions));
  CHECK_THAT(r.err, !Catch::Contains("terminate called"));
  CHECK_THAT(r.err, !Catch::Contains("Aborted"));
}

/// A labelled TSV of two classes decided by one keyword ("good" -> pos, "bad" -> neg) among filler
/// words; every tenth line is long (more than 12 words).
inline std::string keyword_tsv(int64_t lines, uint64_t seed) {
  const std::vector<std::string> filler = {"the",  "a",     "film",  "was",   "very", "quite",
                                           "plot", "actor", "scene", "music", "and",  "it"};
  Generator gen(seed);
  std::string text;
  for (int64_t i = 0; i < lines; ++i) {
    const bool pos = i % 2 == 0;
    const int64_t n = i % 10 == 9 ? 14 : 3 + static_cast<int64_t>(gen.below(4));
    std::vector<std::string> words;
    for (int64_t k = 0; k < n; ++k) words.push_back(filler[gen.below(filler.size())]);
    // within the first words, so that a context of 8 always keeps it
    words.insert(words.begin() + static_cast<int64_t>(gen.below(4)), pos ? "good" : "bad");
    text += pos ? "pos\t" : "neg\t";
    for (size_t k = 0; k < words.size(); ++k) text += (k ? " " : "") + words[k];
    text += "\n";
  }
  return text;
}

/// Trains a small model on a keyword TSV with a context of 8; returns the run directory.
inline std::string train_keyword_model(const TempDir& dir, Result* result = nullptr) {
  const std::string data = dir.file("train.tsv", keyword_tsv(200, 1)), out = dir / "run";
  const Result r = run_cli(dir, cat("train --data ", quote(data),
                                    " --context-length 8 --steps 60 --eval-every 30 --out ", quote(out), " --json"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  if (result) *result = r;
  return out;
}

}  // namespace tapegrad::testing
