// The CUDA driver as gpumem_core calls it: libcuda.so.1 opened at run time (dlopen; the
// GPUMEM_CUDA_DRIVER environment variable names another file, e.g. NVIDIA's forward-compatibility
// libcuda or a test interposer), cuGetProcAddress taken with dlsym and every other entry point
// looked up through it at the CUDA version whose signature this table declares. Nothing links the
// CUDA runtime or the driver, so the Node addon and libgpumem_torch load where there is no driver
// (0 devices) and on any driver from CUDA 12.0 (R525) on; what a driver lacks is said by name
// (driver_shortfall). core/cuda_calls.hpp puts the runtime's semantics (current device, primary
// contexts) over this table. A private header.
#pragma once
#ifdef GPUMEM_WITH_CUDA
#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>
#include <vector>

namespace gpumem::detail {

// The oldest driver the table loads on: CUDA 12.0 (R525), the first with cuGetProcAddress_v2.
constexpr int minimum_driver_version = 12000;

// The driver functions, each at the ABI of the version it is looked up with (12000 unless said): the
// PFN_<name>_v<version> types of cudaTypedefs.h, <version> the CUDA release of that form (the
// newest at or below the version asked for), so that a signature never differs from the pointer.
struct driver_api {
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuGetErrorString_v6000 get_error_string = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceGetCount_v2000 device_get_count = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_get_attribute = nullptr;
  PFN_cuDeviceGetName_v2000 device_get_name = nullptr;
  PFN_cuDeviceTotalMem_v3020 device_total_mem = nullptr;
  PFN_cuDeviceGetPCIBusId_v4010 device_get_pci_bus_id = nullptr;
  PFN_cuDeviceCanAccessPeer_v4000 device_can_access_peer = nullptr;
  PFN_cuDeviceGetP2PAttribute_v8000 device_get_p2p_attribute = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 primary_ctx_retain = nullptr;
  PFN_cuCtxGetCurrent_v4000 ctx_get_current = nullptr;
  PFN_cuCtxSetCurrent_v4000 ctx_set_current = nullptr;
  PFN_cuCtxGetDevice_v2000 ctx_get_device = nullptr;
  PFN_cuCtxSynchronize_v2000 ctx_synchronize = nullptr;
  PFN_cuCtxEnablePeerAccess_v4000 ctx_enable_peer_access = nullptr;
  PFN_cuMemGetInfo_v3020 mem_get_info = nullptr;
  PFN_cuMemAlloc_v3020 mem_alloc = nullptr;
  PFN_cuMemFree_v3020 mem_free = nullptr;
  PFN_cuMemAllocManaged_v6000 mem_alloc_managed = nullptr;
  PFN_cuMemAdvise_v8000 mem_advise_v1 = nullptr;
  PFN_cuMemPrefetchAsync_v8000 mem_prefetch_v1 = nullptr;
  PFN_cuMemAdvise_v12020 mem_advise_v2 = nullptr;        // 12020+, else nullptr (the v1 form is used)
  PFN_cuMemPrefetchAsync_v12020 mem_prefetch_v2 = nullptr;    // 12020+, else nullptr
  PFN_cuMemHostAlloc_v2020 mem_host_alloc = nullptr;
  PFN_cuMemFreeHost_v2000 mem_free_host = nullptr;
  PFN_cuMemHostGetDevicePointer_v3020 mem_host_get_device_pointer = nullptr;
  PFN_cuMemHostRegister_v6050 mem_host_register = nullptr;
  PFN_cuMemHostUnregister_v4000 mem_host_unregister = nullptr;
  PFN_cuMemcpyAsync_v4000 memcpy_async = nullptr;
  PFN_cuStreamCreate_v2000 stream_create = nullptr;
  PFN_cuStreamDestroy_v4000 stream_destroy = nullptr;
  PFN_cuStreamSynchronize_v2000 stream_synchronize = nullptr;
  PFN_cuStreamWaitEvent_v3020 stream_wait_event = nullptr;
  PFN_cuStreamBeginCapture_v10010 stream_begin_capture = nullptr;
  PFN_cuStreamEndCapture_v10000 stream_end_capture = nullptr;
  PFN_cuGraphInstantiateWithFlags_v11040 graph_instantiate = nullptr;
  PFN_cuGraphLaunch_v10000 graph_launch = nullptr;
  PFN_cuGraphExecDestroy_v10000 graph_exec_destroy = nullptr;
  PFN_cuGraphDestroy_v10000 graph_destroy = nullptr;
  PFN_cuEventCreate_v2000 event_create = nullptr;
  PFN_cuEventRecord_v2000 event_record = nullptr;
  PFN_cuEventQuery_v2000 event_query = nullptr;
  PFN_cuEventSynchronize_v2000 event_synchronize = nullptr;
  PFN_cuEventDestroy_v4000 event_destroy = nullptr;
  PFN_cuEventElapsedTime_v2000 event_elapsed_time = nullptr;  // looked up at 12000: the v1 form
  PFN_cuMemPoolCreate_v11020 mem_pool_create = nullptr;
  PFN_cuMemPoolDestroy_v11020 mem_pool_destroy = nullptr;
  PFN_cuMemPoolSetAttribute_v11020 mem_pool_set_attribute = nullptr;
  PFN_cuMemPoolGetAttribute_v11020 mem_pool_get_attribute = nullptr;
  PFN_cuMemPoolSetAccess_v11020 mem_pool_set_access = nullptr;
  PFN_cuMemPoolTrimTo_v11020 mem_pool_trim_to = nullptr;
  PFN_cuMemAllocFromPoolAsync_v11020 mem_alloc_from_pool_async = nullptr;
  PFN_cuMemFreeAsync_v11020 mem_free_async = nullptr;
  // Virtual memory management (expandable, tiered).
  PFN_cuMemGetAllocationGranularity_v10020 get_granularity = nullptr;
  PFN_cuMemAddressReserve_v10020 address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;

  std::string path;          // the library opened (or tried)
  int version = 0;           // cuDriverGetVersion, e.g. 12040; 0 without a driver
  CUresult status = CUDA_ERROR_NOT_INITIALIZED;  // CUDA_SUCCESS once every required entry point was found and cuInit succeeded
  std::string failure;       // empty once every entry point was found; else why not
  std::vector<std::string> missing;  // optional entry points (newer than 12.0) the driver does not have
};

// The table, loaded on first use (thread-safe; cuInit(0) once). Check failure before calling
// anything in it.
const driver_api& driver();

// Throws cuda_error "<who>: <what> failed: <CUDA_ERROR_NAME>" with the driver's status.
[[noreturn]] void throw_driver(const driver_api& api, CUresult status, const char* who, const char* what);

inline void check_driver(const driver_api& api, CUresult status, const char* who, const char* what) {
  if (status != CUDA_SUCCESS) throw_driver(api, status, who, what);
}

// The driver's name for a status ("CUDA_ERROR_OUT_OF_MEMORY") and its text, also without a driver.
const char* driver_error_name(CUresult status) noexcept;
const char* driver_error_string(CUresult status) noexcept;

}  // namespace gpumem::detail

#endif  // GPUMEM_WITH_CUDA
