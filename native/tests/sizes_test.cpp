// Size parsing (gpumem/sizes.hpp) against the case table shared with the TypeScript parser's test
// (size_cases.json), plus the error message.
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "gpumem/errors.hpp"
#include "gpumem/sizes.hpp"

using namespace gpumem;

namespace {

// Just enough JSON for size_cases.json: the string and number tokens of one array, in order.
struct case_table {
  std::vector<std::pair<std::string, std::uint64_t>> accepted;
  std::vector<std::string> rejected;
  std::vector<std::pair<std::string, std::string>> hints;  // refused form, the spelling suggested
  std::vector<std::string> no_hint;
};

// The tokens of the array that follows "key": strings unquoted (no escapes are used), numbers as text.
std::vector<std::string> array_tokens(const std::string& json, const std::string& key) {
  std::vector<std::string> tokens;
  std::size_t i = json.find("\"" + key + "\"");
  if (i == std::string::npos) return tokens;
  i = json.find('[', i);
  int depth = 0;
  for (; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '[') ++depth;
    else if (c == ']') {
      if (--depth == 0) break;
    } else if (c == '"') {
      const std::size_t end = json.find('"', i + 1);
      tokens.push_back(json.substr(i + 1, end - i - 1));
      i = end;
    } else if (c >= '0' && c <= '9') {
      std::size_t end = i;
      while (end < json.size() && json[end] >= '0' && json[end] <= '9') ++end;
      tokens.push_back(json.substr(i, end - i));
      i = end - 1;
    }
  }
  return tokens;
}

case_table load_cases() {
  std::ifstream in(GPUMEM_SIZE_CASES);
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  case_table t;
  const auto accepted = array_tokens(json, "accepted");
  for (std::size_t i = 0; i + 1 < accepted.size(); i += 2) t.accepted.emplace_back(accepted[i], std::stoull(accepted[i + 1]));
  t.rejected = array_tokens(json, "rejected");
  const auto hints = array_tokens(json, "hints");
  for (std::size_t i = 0; i + 1 < hints.size(); i += 2) t.hints.emplace_back(hints[i], hints[i + 1]);
  t.no_hint = array_tokens(json, "noHint");
  return t;
}

}  // namespace

TEST_CASE("shared table accepted forms") {
  const case_table t = load_cases();
  REQUIRE(t.accepted.size() >= 10);
  for (const auto& [text, bytes] : t.accepted) {
    std::uint64_t out = 12345;
    CHECK_MESSAGE(try_parse_size(text, out), "rejected '" << text << "'");
    CHECK_EQ(out, bytes);
    CHECK_EQ(parse_size(text, "size"), bytes);
  }
}

TEST_CASE("shared table rejected forms") {
  const case_table t = load_cases();
  REQUIRE(t.rejected.size() >= 10);
  for (const std::string& text : t.rejected) {
    std::uint64_t out = 12345;
    CHECK_FALSE_MESSAGE(try_parse_size(text, out), "accepted '" << text << "' as " << out);
    CHECK_EQ(out, std::uint64_t(12345));  // untouched
    CHECK_THROWS_AS(parse_size(text, "size"), invalid_argument);
  }
}

TEST_CASE("shared table decimal-looking units: refused, the message naming the binary spelling") {
  const case_table t = load_cases();
  REQUIRE(t.hints.size() >= 8);
  for (const auto& [text, binary] : t.hints) {
    CAPTURE(text);
    std::uint64_t out = 12345;
    CHECK_FALSE(try_parse_size(text, out));
    CHECK(try_parse_size(binary, out));  // the suggestion is itself a valid size
    const std::string hint = size_unit_hint(text);
    CHECK_EQ(hint.rfind("; did you mean '" + binary + "'? gpumem sizes are binary", 0), std::size_t(0));
    try {
      parse_size(text, "GPUMEM_POOL_MAX_RESERVED");
      FAIL("no throw");
    } catch (const invalid_argument& e) {
      CHECK_EQ(std::string(e.what()), "Expected a size (" + std::string(size_form) + ") for GPUMEM_POOL_MAX_RESERVED but received '" +
                                          text + "'" + hint);
    }
  }
  REQUIRE(t.no_hint.size() >= 5);
  for (const std::string& text : t.no_hint) CHECK_MESSAGE(size_unit_hint(text).empty(), "hint for '" << text << "'");
}

TEST_CASE("error names the value and the forms") {
  try {
    parse_size("4KB", "GPUMEM_POOL_MAX_RESERVED");
    FAIL("no throw");
  } catch (const invalid_argument& e) {
    CHECK_EQ(std::string(e.what()),
             std::string("Expected a size (a non-negative integer, optionally followed by KiB, MiB, GiB or TiB (powers "
                         "of 1024; with a unit, a decimal fraction such as 16.5GiB, rounded down to whole bytes)) for "
                         "GPUMEM_POOL_MAX_RESERVED but received '4KB'; did you mean '4KiB'? gpumem sizes "
                         "are binary (KiB, MiB, GiB, TiB: powers of 1024) and decimal units such as GB are not accepted"));
    CHECK_EQ(e.argument(), std::string("GPUMEM_POOL_MAX_RESERVED"));
    CHECK(e.error_kind() == invalid_argument::kind::range);
  }
}
