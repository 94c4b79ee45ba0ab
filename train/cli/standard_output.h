#pragma once
// Writing a command's results to stdout so that a failed write (a full disk, /dev/full, a closed pipe) is found
// at once, before any line on stderr says the work is done.
#include <string_view>

namespace tapegrad::cli {

/// bytes to stdout, flushed; an IOError "stdout: could not write <what> (<errno's reason>)" when they do not
/// all reach it.
void write_stdout(std::string_view bytes, std::string_view what);

}  // namespace tapegrad::cli
