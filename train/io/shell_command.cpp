#include "train/io/shell_command.h"

#include <algorithm>
#include <utility>

namespace tapegrad {

namespace {

std::string& name_slot() {
  static std::string name = "tapegrad";
  return name;
}

bool plain_shell_character(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_-./:,+=@%").find(c) != std::string_view::npos;
}

}  // namespace

const std::string& command_name() { return name_slot(); }

void set_command_name(std::string name) {
  if (!name.empty()) name_slot() = std::move(name);
}

std::string shell_word(const std::string& text) {
  // A word that starts with '-' stays a value only after its flag's '=' (suggested_command's callers write
  // "--prompt=" + text), so only the shell's own characters matter here.
  if (!text.empty() && std::all_of(text.begin(), text.end(), plain_shell_character)) return text;
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string suggested_command(std::initializer_list<std::string> words) {
  std::string command = shell_word(command_name());
  for (const std::string& word : words) {
    command += ' ';
    command += shell_word(word);
  }
  return command;
}

}  // namespace tapegrad
