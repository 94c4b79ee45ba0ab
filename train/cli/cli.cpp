// tapegrad: the command line. train, eval, predict, generate, gradcheck, bench (each in its own file); each has --help.
// A bad flag, value or file gets one line on stderr and a non-zero exit, never a stack trace.
#include "train/cli/cli.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>
#include <stdexcept>

#include "train/cli/bench_command.h"
#include "train/cli/eval_command.h"
#include "train/cli/generate_command.h"
#include "train/cli/gradcheck_command.h"
#include "train/cli/predict_command.h"
#include "train/cli/train_command.h"
#include "train/io/interrupt.h"
#include "train/io/shell_command.h"

using namespace tapegrad;
using namespace tapegrad::cli;

int tapegrad::cli::main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f), write() fails with EFBIG, which the checkpoint code reports with
  // the file's name, instead of SIGXFSZ killing the process without a word.
  std::signal(SIGXFSZ, SIG_IGN);
  if (argc > 0) set_command_name(argv[0]);  // the commands tapegrad suggests name the program as it was started
  CLI::App app{"tapegrad: a from-scratch training framework with a dynamic tape autograd"};
  app.require_subcommand(1);
  TrainFlags train_flags;
  EvalFlags eval_flags;
  PredictFlags predict_flags;
  GradcheckFlags gradcheck_flags;
  add_train(app, train_flags);
  add_eval(app, eval_flags);
  add_predict(app, predict_flags);
  GenerateFlags generate_flags;
  add_generate(app, generate_flags);
  add_gradcheck(app, gradcheck_flags);
  BenchFlags bench_flags;
  add_bench(app, bench_flags);
  const auto subcommand = [&app] {  // " train", for messages; "" before one was parsed
    return app.get_subcommands().empty() ? std::string() : " " + app.get_subcommands()[0]->get_name();
  };
  // Only training runs on several ranks; anything else mpirun starts N times would do N times the same.
  if (const Launch launch = launch_from_environment(); launch.ranks > 1 && (argc < 2 || std::string(argv[1]) != "train")) {
    if (launch.rank == 0)
      std::fprintf(stderr, "tapegrad: mpirun started %d ranks, but only `tapegrad train` runs on several; run %s on one "
                   "process, without mpirun\n", launch.ranks, argc < 2 ? "it" : argv[1]);
    return 2;
  }
  // Results (or --help) that could not be written, to stdout on a full disk or past a file-size limit, are a
  // failure, never a silent exit 0: `code` if everything printed reached stdout, else 1 with one line.
  const auto written = [&subcommand](int code) {
    std::cout.flush();
    errno = 0;
    if (std::fflush(stdout) == 0 && !std::ferror(stdout) && !std::cout.fail()) return code;
    std::fprintf(stderr, "tapegrad%s: stdout: could not write the results%s\n", subcommand().c_str(),
                 errno ? cat(" (", std::strerror(errno), ")").c_str() : "");
    return 1;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return written(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return written(app.exit(e));
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return written(app.exit(e));
    const std::string sub = subcommand();
    const std::string help = sub.empty() ? suggested_command({"--help"}) : suggested_command({sub.substr(1), "--help"});
    std::fprintf(stderr, "tapegrad%s: %s (see %s)\n", sub.c_str(), e.what(), help.c_str());
    return 2;
  } catch (const Interrupted& e) {  // stopped by SIGINT or SIGTERM after saving: exit as a shell reports it
    if (train_flags.launch.rank == 0) std::fprintf(stderr, "%s\n", e.what());
    return 128 + e.signal;
  } catch (const AgreedError& e) {  // every rank knows: rank 0 says it once
    if (train_flags.launch.rank == 0) std::fprintf(stderr, "tapegrad train: %s\n", e.what());
    return 1;
  } catch (const std::exception& caught) {
    // bad_alloc is the last line of defence: the checks before allocating should have named the flag.
    const std::runtime_error out_of_memory("out of memory (an allocation failed); lower the sizes the command line asks for");
    const std::exception& e = dynamic_cast<const std::bad_alloc*>(&caught) ? out_of_memory : caught;
    if (train_flags.launch.ranks > 1 && !train_flags.ranks && train_flags.launch.rank != 0) return 1;  // rank 0 says it
    if (train_flags.ranks && train_flags.ranks->size() > 1) {
      // Only this rank knows: the others would wait for it in their next collective, so all stop now.
      if (dynamic_cast<const CommunicationError*>(&e))  // it names the rank
        std::fprintf(stderr, "tapegrad train: %s\n", e.what());
      else
        std::fprintf(stderr, "tapegrad train (rank %d of %d): %s\n", train_flags.ranks->rank(), train_flags.ranks->size(),
                     e.what());
      std::fflush(stderr);
      train_flags.ranks->abort(1);
    }
    const std::string sub = subcommand();
    std::fprintf(stderr, "tapegrad%s: %s\n", sub.c_str(), e.what());
    return 1;
  }
  return written(0);
}
