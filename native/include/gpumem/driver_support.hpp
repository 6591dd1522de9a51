// Whether the running CUDA driver has what a strategy needs (strategy_descriptor::driver_needs):
// the chain builder and libgpumem_torch's configuration refuse a strategy by name
// (driver_unsupported) on an older driver, instead of failing a driver call later.
#pragma once
#include <string>

#include "gpumem/strategy_registry.hpp"

namespace gpumem {

// The running driver's CUDA version (e.g. 12040) and whether gpumem's driver layer loaded it.
struct driver_summary {
  bool loaded = false;
  int version = 0;
  std::string path;     // the library opened: libcuda.so.1, or $GPUMEM_CUDA_DRIVER
  std::string failure;  // why it is not usable; "" when loaded
};
driver_summary running_driver();

// The first of the strategy's needs the running driver lacks (older than its version, or the entry
// point not found); nullptr when it has them all, when no driver is loaded (a strategy on a device
// then fails as before, for want of a device) or in a build without CUDA.
const driver_need* unmet_driver_need(const strategy_descriptor& strategy);

// Throws driver_unsupported for unmet_driver_need.
void require_driver(const strategy_descriptor& strategy);

}  // namespace gpumem
