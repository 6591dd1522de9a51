// Byte sizes written as text (environment variables, configuration), parsed one way everywhere:
// a non-negative integer, optionally followed by KiB, MiB, GiB or TiB (powers of 1024, the unit's
// case ignored); with a unit, a decimal fraction ("16.5GiB") and one space before the unit
// ("0.5 GiB"), the result rounded down to whole bytes, computed exactly. Nothing else: no sign,
// other spaces, exponents, or other units ("4K", "4KB", "4GB" are rejected rather than guessed at). At most 2^53 - 1 bytes, so that every size is exact as a
// JavaScript number too. The TypeScript parser (@gpumem/allocator-core parseSize) accepts exactly
// the same forms; native/tests/size_cases.json holds the cases both are tested against.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace gpumem {

// The largest size: 2^53 - 1 (Number.MAX_SAFE_INTEGER).
constexpr std::uint64_t max_size_bytes = (std::uint64_t(1) << 53) - 1;

// The accepted forms, for error messages.
extern const char* const size_form;

// Parses `text`; false (and `out` untouched) for anything that is not one of the forms above.
bool try_parse_size(std::string_view text, std::uint64_t& out) noexcept;

// Parses `text`; throws invalid_argument (range) naming `name`:
// "Expected a size (a non-negative integer, ...) for NAME but received '4KB'".
std::uint64_t parse_size(std::string_view text, const char* name);

// What error messages add for a size written with a decimal-looking unit (K, M, G or T, with or
// without B: "4GB", "4G", "512mb"): "; did you mean '4GiB'? ..." naming the binary spelling, where
// that spelling is a valid size; "" for anything else. Such units are refused rather than read as
// powers of 1000 (or guessed to be binary): the two readings differ by 7% at GiB.
std::string size_unit_hint(std::string_view text);

}  // namespace gpumem
