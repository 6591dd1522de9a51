#include "gpumem/sizes.hpp"

#include <string>

#include "gpumem/errors.hpp"

namespace gpumem {

const char* const size_form =
    "a non-negative integer, optionally followed by KiB, MiB, GiB or TiB (powers of 1024)";

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// The power of 1024 named by `suffix` ("" is bytes); -1 for anything else.
int unit_shift(std::string_view suffix) {
  if (suffix.empty()) return 0;
  if (suffix.size() != 3 || lower(suffix[1]) != 'i' || lower(suffix[2]) != 'b') return -1;
  switch (lower(suffix[0])) {
    case 'k': return 10;
    case 'm': return 20;
    case 'g': return 30;
    case 't': return 40;
    default: return -1;
  }
}

}  // namespace

bool try_parse_size(std::string_view text, std::uint64_t& out) noexcept {
  std::size_t i = 0;
  std::uint64_t value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    value = value * 10 + static_cast<std::uint64_t>(text[i] - '0');
    if (value > max_size_bytes) return false;  // checked per digit, so it cannot wrap
    ++i;
  }
  if (i == 0) return false;  // no digits: also rejects a sign, spaces, "0x"
  const int shift = unit_shift(text.substr(i));
  if (shift < 0) return false;
  if (value > (max_size_bytes >> shift)) return false;
  out = value << shift;
  return true;
}

std::uint64_t parse_size(std::string_view text, const char* name) {
  std::uint64_t bytes = 0;
  if (!try_parse_size(text, bytes)) {
    throw invalid_argument(invalid_argument::kind::range, name,
                           std::string("Expected a size (") + size_form + ") for " + name + " but received '" + std::string(text) +
                               "'" + size_unit_hint(text));
  }
  return bytes;
}

std::string size_unit_hint(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string_view unit = text.substr(digits);
  if (digits == 0 || unit.empty() || unit.size() > 2 || (unit.size() == 2 && lower(unit[1]) != 'b')) return "";
  const char prefix = lower(unit[0]);
  if (prefix != 'k' && prefix != 'm' && prefix != 'g' && prefix != 't') return "";
  std::string binary(text.substr(0, digits));
  binary += static_cast<char>(prefix - 'a' + 'A');
  binary += "iB";
  std::uint64_t bytes = 0;
  if (!try_parse_size(binary, bytes)) return "";  // never suggest a value that is itself refused
  return "; did you mean '" + binary + "'? gpumem sizes are binary (KiB, MiB, GiB, TiB: powers of 1024) and decimal units such as GB are not accepted";
}

}  // namespace gpumem
