#pragma once
// Running the tapegrad command line as a real process from a test (TAPEGRAD_CLI is its path, defined for
// test_train), and the failure contract every bad input must meet: one line on stderr, a non-zero exit.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/error.h"
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

/// Runs `tapegrad <args>` (args already shell-quoted where needed) with stdin from `input`, capturing
/// stdout and stderr separately.
inline Result run_cli(const TempDir& dir, const std::string& args, const std::string& input = "") {
  const std::string in = dir.file("stdin.txt", input), out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string command = cat(quote(TAPEGRAD_CLI), " ", args, " <", quote(in), " >", quote(out), " 2>", quote(err));
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

}  // namespace tapegrad::testing
