#include "gpumem/placement.hpp"

#include <string>

#include "gpumem/errors.hpp"

namespace gpumem {

const char* placement_name(placement where) noexcept { return where == placement::device ? "device" : "host"; }

const char* placement_choice_name(placement_choice choice) noexcept {
  switch (choice) {
    case placement_choice::automatic: return "auto";
    case placement_choice::device: return "device";
    case placement_choice::host: return "host";
  }
  return "auto";
}

placement_choice parse_placement_choice(const char* name, const char* argument) {
  const std::string n = name == nullptr ? "" : name;
  if (n == "auto") return placement_choice::automatic;
  if (n == "device") return placement_choice::device;
  if (n == "host") return placement_choice::host;
  throw invalid_argument(invalid_argument::kind::type, argument,
                         std::string("Expected one of 'auto', 'device', 'host' for ") + argument + " but received '" + n +
                             "' of type string");
}

}  // namespace gpumem
