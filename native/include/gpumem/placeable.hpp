// Memory whose tier new allocations go to can be chosen from now on: the device, the host, or
// automatic (the device while its budget and the driver allow, else the host). The tiered strategy's
// leaf is one; a built chain names it (resource_chain::placer), so that a front end (the addon's
// setPlacement, libgpumem_torch's per-thread placement) switches it without naming a strategy.
#pragma once

#include <cstdint>

namespace gpumem {

// Where new blocks go: automatic (the device while its budget and the driver allow, else the host),
// the device only, or the host only.
enum class tier_choice : std::uint8_t { automatic, device, host };

// "auto", "device", "host"; parse_tier_choice throws invalid_argument (type, naming `argument`) for
// anything else.
const char* tier_choice_name(tier_choice choice) noexcept;
tier_choice parse_tier_choice(const char* name, const char* argument = "placement");

class placeable {
 public:
  virtual ~placeable() = default;
  // Where allocations go from now on (the whole resource, every thread).
  virtual void set_placement(tier_choice choice) noexcept = 0;
  virtual tier_choice placement() const noexcept = 0;
  // The placement the resource was made with, which set_placement(...) calls do not change: where a
  // caller goes back to between its own choices.
  virtual tier_choice configured_placement() const noexcept = 0;
};

}  // namespace gpumem
