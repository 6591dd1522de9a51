#include "gpumem/sizes.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "gpumem/errors.hpp"

namespace gpumem {

const char* const size_form =
    "a non-negative integer, optionally followed by KiB, MiB, GiB or TiB (powers of 1024; with a unit, a decimal fraction "
    "such as 16.5GiB, rounded down to whole bytes)";

namespace {

// The most digits a fraction may have: far past a byte's precision at TiB (13 digits), and a bound
// that keeps the exact arithmetic on the stack.
constexpr std::size_t max_fraction_digits = 64;

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

// floor(0.DIGITS * 2^shift), exactly: the fraction's digits doubled `shift` times as a decimal
// number, each carry out of its first digit one more bit of the result.
// `fraction` holds at most max_fraction_digits digits.
std::uint64_t fraction_bits(std::string_view fraction, int shift) noexcept {
  std::array<char, max_fraction_digits> digits{};
  std::copy(fraction.begin(), fraction.end(), digits.begin());
  std::uint64_t bits = 0;
  for (int s = 0; s < shift; ++s) {
    int carry = 0;
    for (std::size_t j = fraction.size(); j-- > 0;) {
      const int v = (digits[j] - '0') * 2 + carry;
      digits[j] = static_cast<char>('0' + v % 10);
      carry = v / 10;
    }
    bits = bits * 2 + static_cast<std::uint64_t>(carry);
  }
  return bits;
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
  std::string_view fraction;
  if (i < text.size() && text[i] == '.') {
    const std::size_t start = ++i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    fraction = text.substr(start, i - start);
    if (fraction.empty() || fraction.size() > max_fraction_digits) return false;  // "1.GiB", or a fraction past any use
  }
  const bool spaced = i < text.size() && text[i] == ' ';
  if (spaced) ++i;
  const int shift = unit_shift(text.substr(i));
  if (shift < 0) return false;
  if (shift == 0 && (spaced || !fraction.empty())) return false;  // "1 ", a fraction of a byte
  if (value > (max_size_bytes >> shift)) return false;
  const std::uint64_t bytes = (value << shift) + (fraction.empty() ? 0 : fraction_bits(fraction, shift));
  if (bytes > max_size_bytes) return false;
  out = bytes;
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
  if (digits == 0) return "";
  if (digits < text.size() && text[digits] == '.') {  // a fraction: "1.5GB"
    const std::size_t start = ++digits;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == start) return "";
  }
  if (digits < text.size() && text[digits] == ' ') ++digits;  // "1 GB"
  const std::string_view unit = text.substr(digits);
  if (unit.empty() || unit.size() > 2 || (unit.size() == 2 && lower(unit[1]) != 'b')) return "";
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
