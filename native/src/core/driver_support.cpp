#include "gpumem/driver_support.hpp"

#include <algorithm>

#include "gpumem/errors.hpp"

#ifdef GPUMEM_WITH_CUDA
#include "resources/cuda_driver.hpp"
#endif

namespace gpumem {

#ifdef GPUMEM_WITH_CUDA

driver_summary running_driver() {
  const detail::driver_api& api = detail::driver();
  return {api.status == CUDA_SUCCESS, api.version, api.path, api.failure};
}

const driver_need* unmet_driver_need(const strategy_descriptor& strategy) {
  const detail::driver_api& api = detail::driver();
  if (api.status != CUDA_SUCCESS) return nullptr;
  for (const driver_need& need : strategy.driver_needs) {
    const bool missing = std::find(api.missing.begin(), api.missing.end(), need.what) != api.missing.end();
    if (missing || need.version > api.version) return &need;
  }
  return nullptr;
}

#else

driver_summary running_driver() { return {false, 0, "", "gpumem was built without CUDA"}; }
const driver_need* unmet_driver_need(const strategy_descriptor&) { return nullptr; }

#endif

void require_driver(const strategy_descriptor& strategy) {
  if (const driver_need* need = unmet_driver_need(strategy)) {
    throw driver_unsupported(strategy.name, need->what, need->version, running_driver().version);
  }
}

}  // namespace gpumem
