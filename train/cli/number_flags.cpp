#include "train/cli/number_flags.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

#include "autograd/dtype.h"
#include "autograd/error.h"

namespace tapegrad::cli {

namespace {

[[noreturn]] void refuse(const std::string& flag, const std::string& what) { throw CLI::ValidationError(flag, what); }

std::string shown(std::string_view text) { return in_quotes(text); }

/// Decimal digits with an optional leading '-' and no leading zero: "0", "7", "-12"; not "", "010", "+1",
/// " 1", "1x", "0x10", "-0".
bool is_decimal_integer(std::string_view text) {
  const std::string_view digits = text.starts_with('-') ? text.substr(1) : text;
  if (digits.empty()) return false;
  for (char c : digits)
    if (c < '0' || c > '9') return false;
  return !(digits.front() == '0' && (digits.size() > 1 || digits.size() != text.size()));
}

void require_decimal_integer(const std::string& flag, std::string_view text) {
  if (text.empty()) refuse(flag, "empty value (give a decimal integer)");
  if (!is_decimal_integer(text))
    refuse(flag, cat(shown(text), " is not a decimal integer (digits and an optional leading '-'; no leading zero, "
                                  "'+', spaces, fraction or base prefix)"));
}

}  // namespace

int64_t parse_signed(const std::string& flag, std::string_view text, int64_t min, int64_t max) {
  require_decimal_integer(flag, text);
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 10);
  if (error == std::errc::result_out_of_range || value < min || value > max)
    refuse(flag, cat(text, " is outside the range [", min, ", ", max, "]"));
  if (error != std::errc() || end != text.data() + text.size()) refuse(flag, cat(shown(text), " is not a decimal integer"));
  return value;
}

uint64_t parse_unsigned(const std::string& flag, std::string_view text) {
  require_decimal_integer(flag, text);
  constexpr uint64_t max = std::numeric_limits<uint64_t>::max();
  if (text.starts_with('-')) refuse(flag, cat(text, " is outside the range [0, ", max, "]"));
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 10);
  if (error == std::errc::result_out_of_range) refuse(flag, cat(text, " is outside the range [0, ", max, "]"));
  if (error != std::errc() || end != text.data() + text.size()) refuse(flag, cat(shown(text), " is not a decimal integer"));
  return value;
}

double parse_real(const std::string& flag, std::string_view text) {
  if (text.empty()) refuse(flag, "empty value (give a number)");
  double value = 0;
  // chars_format::general: decimal or scientific, never hex ("0x1p3" stops after the "0").
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, std::chars_format::general);
  if (error == std::errc::invalid_argument || end != text.data() + text.size())
    refuse(flag, cat(shown(text), " is not a number (decimal or scientific like 0.001 or 1e-3; no '+', spaces or hex)"));
  if (error == std::errc::result_out_of_range)
    refuse(flag, cat(text, " cannot be held by a double (its magnitude is beyond about 1.8e308, or so small that it "
                           "would round to a denormal or 0)"));
  // One rule for every real flag: what float32, in which models compute, holds (a setting, a rate, a norm
  // bound). The few kept in double (--comm-timeout's seconds) lose no real use by it. nan and inf pass: each
  // flag's range rule names them with its range.
  if (std::isfinite(value) && !float32_holds(value)) refuse(flag, cat(text, " ", float32_refusal(value)));
  return value;
}

CLI::Option* add_path_option(CLI::App* cmd, const std::string& flag, std::string& field, const std::string& help) {
  const CLI::Validator not_empty(
      [](std::string& text) { return text.empty() ? std::string("empty path") : std::string(); }, "", "not empty");
  return cmd->add_option(flag, field, help)->check(not_empty);
}

}  // namespace tapegrad::cli
