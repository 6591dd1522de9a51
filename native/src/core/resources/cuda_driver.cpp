// See cuda_driver.hpp.
#include "cuda_driver.hpp"

#ifdef GPUMEM_WITH_CUDA
#include <cuda_runtime_api.h>

#include "gpumem/errors.hpp"

namespace gpumem::detail {
namespace {

template <class F>
bool lookup(const char* symbol, F& fn, std::string& failure) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t status = cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &found);
  if (status != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
    cudaGetLastError();
    failure = status != cudaSuccess ? std::string("the CUDA driver is not available (") + cudaGetErrorName(status) + ")"
                                    : std::string("the CUDA driver has no ") + symbol;
    return false;
  }
  fn = reinterpret_cast<F>(p);
  return true;
}

}  // namespace

const driver_api& driver() {
  static const driver_api api = [] {
    driver_api a;
    std::string& f = a.failure;
    (void)(lookup("cuGetErrorName", a.get_error_name, f) && lookup("cuDeviceGet", a.device_get, f) &&
           lookup("cuDeviceGetAttribute", a.device_get_attribute, f) &&
           lookup("cuDeviceTotalMem", a.device_total_mem, f) &&
           lookup("cuMemGetAllocationGranularity", a.get_granularity, f) &&
           lookup("cuMemAddressReserve", a.address_reserve, f) && lookup("cuMemAddressFree", a.address_free, f) &&
           lookup("cuMemCreate", a.create, f) && lookup("cuMemRelease", a.release, f) &&
           lookup("cuMemMap", a.map, f) && lookup("cuMemUnmap", a.unmap, f) &&
           lookup("cuMemSetAccess", a.set_access, f));
    return a;
  }();
  return api;
}

void throw_driver(const driver_api& api, CUresult status, const char* who, const char* what) {
  const char* name = "CUDA_ERROR_UNKNOWN";
  if (api.get_error_name != nullptr) api.get_error_name(status, &name);
  throw cuda_error(std::string(who) + ": " + what + " failed: " + name, static_cast<int>(status), name);
}

}  // namespace gpumem::detail

#endif  // GPUMEM_WITH_CUDA
