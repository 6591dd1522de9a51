// Memory whose tier new allocations go to can be chosen from now on: the device, the host, or
// automatic (the device while its budget and the driver allow, else the host). The tiered strategy's
// leaf is one; a built chain names it (resource_chain::placer), so that a front end (the addon's
// setPlacement, libgpumem_torch's per-thread placement) switches it without naming a strategy.
#pragma once

#include "gpumem/placement.hpp"

namespace gpumem {

class placeable {
 public:
  virtual ~placeable() = default;
  // Where allocations go from now on (the whole resource, every thread).
  virtual void set_placement(placement_choice choice) noexcept = 0;
  virtual placement_choice current_placement() const noexcept = 0;
  // The placement the resource was made with, which set_placement(...) calls do not change: where a
  // caller goes back to between its own choices.
  virtual placement_choice configured_placement() const noexcept = 0;
};

}  // namespace gpumem
