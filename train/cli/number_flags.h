#pragma once
// Every number on tapegrad's command line is read by the one strict parser below, never by CLI11's own
// conversion, which reads "010" as octal 8, "0x10" as 16, an empty value as 0, " 1" as 1, and wraps
// "-5" into an unsigned seed of 2^64 - 5. The rules, the same for every flag of every subcommand:
//   integer: decimal digits, a leading '-' allowed, no leading zero ("010" is refused, not read as 8 or
//            10: whoever wrote it meant something we cannot know), no '+', no spaces, no base prefix, and
//            a value that fits the field's type ("--seed -5" and "--steps 9223372036854775808" are refused
//            with the range). The range a run can use is validate()'s (train/train_options.cpp).
//   real   : what std::from_chars reads in full (decimal or scientific, a leading '-', "nan", "inf";
//            no hex floats, no '+', no spaces), and held by float32, in which models compute: 0 or a magnitude
//            in about [1.2e-38, 3.4e38] ("--norm-eps 1e300" is infinite there, "--lr 1e-50" is 0). "nan" and
//            "inf" are numbers to the parser: validate() refuses them by the flag's name with its range.
//   path   : not empty ("--resume ''" must not mean "no --resume").
// Refusals are CLI11 ValidationErrors, "--flag: what is wrong", a parse error (exit 2).
// tests/train/test_bad_inputs.cpp reads every subcommand's --help and feeds each numeric flag bad values,
// so a flag added with plain add_option (CLI11 converts it) fails that test.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

namespace tapegrad::cli {

/// text as an integer of the given range under the rules above, or a CLI::ValidationError naming flag.
int64_t parse_signed(const std::string& flag, std::string_view text, int64_t min, int64_t max);
uint64_t parse_unsigned(const std::string& flag, std::string_view text);
/// text as a double under the rules above, or a CLI::ValidationError naming flag.
double parse_real(const std::string& flag, std::string_view text);

/// --flag setting an integer field through the strict parser. --help shows INT (UINT when unsigned), and
/// ->capture_default_str() shows the field's value before parsing, as CLI11's add_option does.
template <class T>
CLI::Option* add_integer_option(CLI::App* cmd, const std::string& flag, T& field, const std::string& help) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>, "an integer field");
  const auto parse = [&field, flag](const std::string& text) {
    if constexpr (std::is_signed_v<T>)
      field = static_cast<T>(parse_signed(flag, text, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
    else if constexpr (sizeof(T) == sizeof(uint64_t))
      field = parse_unsigned(flag, text);
    else
      static_assert(sizeof(T) == sizeof(uint64_t), "unsigned flags are 64-bit (the seed)");
  };
  return cmd->add_option_function<std::string>(flag, parse, help)
      ->type_name(std::is_signed_v<T> ? "INT" : "UINT")
      ->default_function([&field] { return std::to_string(field); });
}

/// --flag setting a double field through the strict parser; --help shows FLOAT.
inline CLI::Option* add_real_option(CLI::App* cmd, const std::string& flag, double& field, const std::string& help) {
  return cmd->add_option_function<std::string>(flag, [&field, flag](const std::string& text) { field = parse_real(flag, text); }, help)
      ->type_name("FLOAT")
      ->default_function([&field] {
        std::ostringstream shown;
        shown << field;
        return shown.str();
      });
}

/// --flag naming a file or directory: an empty value is refused ("--resume: empty path"), never taken
/// for the flag's absence.
CLI::Option* add_path_option(CLI::App* cmd, const std::string& flag, std::string& field, const std::string& help);

}  // namespace tapegrad::cli
