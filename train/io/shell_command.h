#pragma once
// The commands tapegrad suggests (train's `try:` line, "continue with: ..." after a stop), written so that
// they run as printed: the program as the user started it (argv[0], which may be build/tapegrad or a
// program of their own built on the library), and every word quoted for a POSIX shell where it needs it.
#include <initializer_list>
#include <string>

namespace tapegrad {

/// The program the suggestions name: what main() was started as; "tapegrad" until it is set.
const std::string& command_name();
void set_command_name(std::string name);

/// text as one shell word: unchanged when it is made of characters no shell treats specially (letters,
/// digits, and _ - . / : , + = @ %), otherwise in single quotes ('\'' for a quote inside).
std::string shell_word(const std::string& text);

/// command_name() and then each of words as a shell word, separated by spaces.
std::string suggested_command(std::initializer_list<std::string> words);

}  // namespace tapegrad
