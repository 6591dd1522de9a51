// See cuda_driver.hpp.
#include "cuda_driver.hpp"

#ifdef GPUMEM_WITH_CUDA
#include <dlfcn.h>

#include <cstdlib>

#include "gpumem/errors.hpp"

namespace gpumem::detail {
namespace {

// cuGetProcAddress_v2 (CUDA 12.0 on) says whether a symbol was found; the v1 form (11.3) does not.
using get_proc_address_v2 = PFN_cuGetProcAddress_v12000;
using get_proc_address_v1 = PFN_cuGetProcAddress_v11030;

struct loader {
  get_proc_address_v2 v2 = nullptr;
  get_proc_address_v1 v1 = nullptr;

  // The entry point `symbol` at `version` (the ABI of that CUDA release); nullptr where the driver
  // has none. Legacy default-stream forms, as the runtime's default build uses.
  void* find(const char* symbol, int version) const {
    void* p = nullptr;
    CUresult status = CUDA_ERROR_NOT_FOUND;
    if (v2 != nullptr) {
      CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
      status = v2(symbol, &p, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found);
      if (found != CU_GET_PROC_ADDRESS_SUCCESS) return nullptr;
    } else {
      status = v1(symbol, &p, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    }
    return status == CUDA_SUCCESS ? p : nullptr;
  }

  // A required entry point: records the first one missing in `failure`.
  template <class F>
  bool need(const char* symbol, F& fn, std::string& failure, int version = minimum_driver_version) const {
    fn = reinterpret_cast<F>(find(symbol, version));
    if (fn == nullptr && failure.empty()) {
      failure = std::string("the CUDA driver has no ") + symbol + " (cuGetProcAddress at CUDA " +
                std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10) + ")";
    }
    return fn != nullptr;
  }
};

// The driver's name for `status`, or the name of a status this layer reports itself; nullptr when
// neither knows it.
const char* name_of(const driver_api& api, CUresult status) noexcept {
  const char* name = nullptr;
  if (api.get_error_name != nullptr && api.get_error_name(status, &name) == CUDA_SUCCESS && name != nullptr) return name;
  switch (status) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    default: return nullptr;
  }
}

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

void load(driver_api& a) {
  const char* env = std::getenv("GPUMEM_CUDA_DRIVER");
  a.path = env != nullptr && *env != '\0' ? env : "libcuda.so.1";
  // Never closed: the entry points are used until the process exits.
  void* library = dlopen(a.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    a.failure = "no CUDA driver: " + a.path + " could not be opened (" + (why != nullptr ? why : "unknown") + ")";
    a.status = CUDA_ERROR_NO_DEVICE;
    return;
  }
  loader l;
  l.v2 = reinterpret_cast<get_proc_address_v2>(dlsym(library, "cuGetProcAddress_v2"));
  if (l.v2 == nullptr) l.v1 = reinterpret_cast<get_proc_address_v1>(dlsym(library, "cuGetProcAddress"));
  auto init = reinterpret_cast<PFN_cuInit_v2000>(dlsym(library, "cuInit"));
  auto get_version = reinterpret_cast<PFN_cuDriverGetVersion_v2020>(dlsym(library, "cuDriverGetVersion"));
  if ((l.v1 == nullptr && l.v2 == nullptr) || init == nullptr || get_version == nullptr) {
    a.failure = "the CUDA driver " + a.path + " has no cuGetProcAddress (gpumem needs CUDA " +
                cuda_version_text(minimum_driver_version) + ", driver R525, or later)";
    a.status = CUDA_ERROR_NOT_SUPPORTED;
    return;
  }
  if (get_version(&a.version) != CUDA_SUCCESS) a.version = 0;
  if (a.version < minimum_driver_version) {
    a.failure = "the NVIDIA driver supports CUDA " + cuda_version_text(a.version) + "; gpumem needs CUDA " +
                cuda_version_text(minimum_driver_version) + " (driver R525) or later";
    a.status = CUDA_ERROR_NOT_SUPPORTED;
    return;
  }
  // The error names first, so that every later failure can be reported by name.
  l.need("cuGetErrorName", a.get_error_name, a.failure);
  l.need("cuGetErrorString", a.get_error_string, a.failure);
  const CUresult init_status = init(0);
  if (init_status != CUDA_SUCCESS) {
    const char* name = name_of(a, init_status);
    a.failure = std::string("cuInit failed: ") + (name != nullptr ? name : "CUDA_ERROR_UNKNOWN");
    a.status = init_status;
    return;
  }
  std::string& f = a.failure;
  l.need("cuDeviceGet", a.device_get, f);
  l.need("cuDeviceGetCount", a.device_get_count, f);
  l.need("cuDeviceGetAttribute", a.device_get_attribute, f);
  l.need("cuDeviceGetName", a.device_get_name, f);
  l.need("cuDeviceTotalMem", a.device_total_mem, f);
  l.need("cuDeviceGetPCIBusId", a.device_get_pci_bus_id, f);
  l.need("cuDeviceCanAccessPeer", a.device_can_access_peer, f);
  l.need("cuDeviceGetP2PAttribute", a.device_get_p2p_attribute, f);
  l.need("cuDevicePrimaryCtxRetain", a.primary_ctx_retain, f);
  l.need("cuCtxGetCurrent", a.ctx_get_current, f);
  l.need("cuCtxSetCurrent", a.ctx_set_current, f);
  l.need("cuCtxGetDevice", a.ctx_get_device, f);
  l.need("cuCtxSynchronize", a.ctx_synchronize, f);
  l.need("cuCtxEnablePeerAccess", a.ctx_enable_peer_access, f);
  l.need("cuMemGetInfo", a.mem_get_info, f);
  l.need("cuMemAlloc", a.mem_alloc, f);
  l.need("cuMemFree", a.mem_free, f);
  l.need("cuMemAllocManaged", a.mem_alloc_managed, f);
  // At 12000 these two are the device-ordinal forms (cuda.h: cuMemAdvise_v2 and
  // cuMemPrefetchAsync_v2, with a CUmemLocation, are __CUDA_API_VERSION 12020).
  l.need("cuMemAdvise", a.mem_advise_v1, f);
  l.need("cuMemPrefetchAsync", a.mem_prefetch_v1, f);
  l.need("cuMemHostAlloc", a.mem_host_alloc, f);
  l.need("cuMemFreeHost", a.mem_free_host, f);
  l.need("cuMemHostGetDevicePointer", a.mem_host_get_device_pointer, f);
  l.need("cuMemHostRegister", a.mem_host_register, f);
  l.need("cuMemHostUnregister", a.mem_host_unregister, f);
  l.need("cuMemcpyAsync", a.memcpy_async, f);
  l.need("cuStreamCreate", a.stream_create, f);
  l.need("cuStreamDestroy", a.stream_destroy, f);
  l.need("cuStreamSynchronize", a.stream_synchronize, f);
  l.need("cuStreamWaitEvent", a.stream_wait_event, f);
  l.need("cuStreamBeginCapture", a.stream_begin_capture, f);
  l.need("cuStreamEndCapture", a.stream_end_capture, f);
  l.need("cuGraphInstantiateWithFlags", a.graph_instantiate, f);
  l.need("cuGraphLaunch", a.graph_launch, f);
  l.need("cuGraphExecDestroy", a.graph_exec_destroy, f);
  l.need("cuGraphDestroy", a.graph_destroy, f);
  l.need("cuEventCreate", a.event_create, f);
  l.need("cuEventRecord", a.event_record, f);
  l.need("cuEventQuery", a.event_query, f);
  l.need("cuEventSynchronize", a.event_synchronize, f);
  l.need("cuEventDestroy", a.event_destroy, f);
  l.need("cuEventElapsedTime", a.event_elapsed_time, f);
  l.need("cuMemPoolCreate", a.mem_pool_create, f);
  l.need("cuMemPoolDestroy", a.mem_pool_destroy, f);
  l.need("cuMemPoolSetAttribute", a.mem_pool_set_attribute, f);
  l.need("cuMemPoolGetAttribute", a.mem_pool_get_attribute, f);
  l.need("cuMemPoolSetAccess", a.mem_pool_set_access, f);
  l.need("cuMemPoolTrimTo", a.mem_pool_trim_to, f);
  l.need("cuMemAllocFromPoolAsync", a.mem_alloc_from_pool_async, f);
  l.need("cuMemFreeAsync", a.mem_free_async, f);
  l.need("cuMemGetAllocationGranularity", a.get_granularity, f);
  l.need("cuMemAddressReserve", a.address_reserve, f);
  l.need("cuMemAddressFree", a.address_free, f);
  l.need("cuMemCreate", a.create, f);
  l.need("cuMemRelease", a.release, f);
  l.need("cuMemMap", a.map, f);
  l.need("cuMemUnmap", a.unmap, f);
  l.need("cuMemSetAccess", a.set_access, f);
  // Newer than the floor: asked for only where the driver is that new (cuGetProcAddress answers a
  // newer version with the newest form it has, whose signature may be another), and optional.
  constexpr int location_forms = 12020;
  if (a.version >= location_forms) {
    a.mem_advise_v2 = reinterpret_cast<PFN_cuMemAdvise_v12020>(l.find("cuMemAdvise", location_forms));
    a.mem_prefetch_v2 = reinterpret_cast<PFN_cuMemPrefetchAsync_v12020>(l.find("cuMemPrefetchAsync", location_forms));
  }
  if (a.mem_advise_v2 == nullptr) a.missing.emplace_back("cuMemAdvise_v2");
  if (a.mem_prefetch_v2 == nullptr) a.missing.emplace_back("cuMemPrefetchAsync_v2");
  a.status = f.empty() ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

}  // namespace

const driver_api& driver() {
  static const driver_api api = [] {
    driver_api a;
    load(a);
    return a;
  }();
  return api;
}

const char* driver_error_name(CUresult status) noexcept {
  const char* name = name_of(driver(), status);
  return name != nullptr ? name : "CUDA_ERROR_UNKNOWN";
}

const char* driver_error_string(CUresult status) noexcept {
  const driver_api& api = driver();
  const char* text = nullptr;
  if (api.get_error_string != nullptr && api.get_error_string(status, &text) == CUDA_SUCCESS && text != nullptr) return text;
  if (!api.failure.empty()) return api.failure.c_str();
  return "unknown error";
}

void throw_driver(const driver_api&, CUresult status, const char* who, const char* what) {
  const char* name = driver_error_name(status);
  throw cuda_error(std::string(who) + ": " + what + " failed: " + name, static_cast<int>(status), name);
}

}  // namespace gpumem::detail

#endif  // GPUMEM_WITH_CUDA
