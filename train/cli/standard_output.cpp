#include "train/cli/standard_output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "autograd/error.h"

namespace tapegrad::cli {

void write_stdout(std::string_view bytes, std::string_view what) {
  std::cout.flush();  // what went through std::cout first stays first
  errno = 0;
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() || std::fflush(stdout) != 0)
    throw IOError(cat("stdout: could not write ", what, errno ? cat(" (", std::strerror(errno), ")") : ""));
}

}  // namespace tapegrad::cli
