// The CUDA driver entry points that the virtual-memory strategies use (device_vmm.cpp, the VMM
// primitive under expandable, caching's expandable segments and tiered), looked up once through the runtime
// (cudaGetDriverEntryPointByVersion) rather than linked, so that the addon loads where there is no
// driver and only the strategies that need one report what is missing. A private header.
#pragma once
#ifdef GPUMEM_WITH_CUDA
#include <cuda.h>

#include <string>

namespace gpumem::detail {

// The driver functions, at their CUDA 12 ABI.
struct driver_api {
  decltype(&cuGetErrorName) get_error_name = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&cuDeviceTotalMem_v2) device_total_mem = nullptr;
  decltype(&cuMemGetAllocationGranularity) get_granularity = nullptr;
  decltype(&cuMemAddressReserve) address_reserve = nullptr;
  decltype(&cuMemAddressFree) address_free = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemRelease) release = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  decltype(&cuMemSetAccess) set_access = nullptr;
  std::string failure;  // empty once every entry point was found; else why not
};

// The table, looked up on first use (thread-safe). Check failure before calling anything in it.
const driver_api& driver();

// Throws cuda_error "<who>: <what> failed: <CUDA_ERROR_NAME>" with the driver's status.
[[noreturn]] void throw_driver(const driver_api& api, CUresult status, const char* who, const char* what);

inline void check_driver(const driver_api& api, CUresult status, const char* who, const char* what) {
  if (status != CUDA_SUCCESS) throw_driver(api, status, who, what);
}

}  // namespace gpumem::detail

#endif  // GPUMEM_WITH_CUDA
