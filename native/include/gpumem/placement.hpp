// Placement: where memory is, or where it goes. One word and one type for it across the core
// (docs/glossary.md): `placement` is the device or the host (a prefetch's destination, a VMM
// allocation's tier, where a pool's segments or expandable's granules come from); `placement_choice`
// is a placement or `automatic`, for the options that let the strategy or the driver decide
// (tiered's placement and backing: "auto"; uvm's advice: "none", no hint).
// What kind of memory a resource hands out (memory_kind: host, device, managed, pinned) and whether
// host memory is pinned (pinned_upstream) are other questions and keep their own types.
#pragma once

#include <cstdint>

namespace gpumem {

enum class placement : std::uint8_t { device = 0, host = 1 };

enum class placement_choice : std::uint8_t { automatic, device, host };

// "device", "host".
const char* placement_name(placement where) noexcept;
// "auto", "device", "host"; parse_placement_choice throws invalid_argument (type, naming `argument`)
// for anything else.
const char* placement_choice_name(placement_choice choice) noexcept;
placement_choice parse_placement_choice(const char* name, const char* argument = "placement");

}  // namespace gpumem
