// See cuda_calls.hpp.
#include "cuda_calls.hpp"

#ifdef GPUMEM_WITH_CUDA
#include <atomic>
#include <cstddef>
#include <mutex>
#include <unordered_map>

#include "resources/cuda_driver.hpp"

namespace gpumem::detail::cu {
namespace {

// The runtime's structures are the driver's, field for field (driver_types.h mirrors cuda.h).
static_assert(sizeof(cudaMemPoolProps) == sizeof(CUmemPoolProps) &&
                  offsetof(cudaMemPoolProps, location) == offsetof(CUmemPoolProps, location) &&
                  offsetof(cudaMemPoolProps, maxSize) == offsetof(CUmemPoolProps, maxSize),
              "cudaMemPoolProps and CUmemPoolProps differ");
static_assert(sizeof(cudaMemAccessDesc) == sizeof(CUmemAccessDesc) &&
                  offsetof(cudaMemAccessDesc, flags) == offsetof(CUmemAccessDesc, flags),
              "cudaMemAccessDesc and CUmemAccessDesc differ");
static_assert(sizeof(cudaMemLocation) == sizeof(CUmemLocation), "cudaMemLocation and CUmemLocation differ");

CUdeviceptr address(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// The device's primary context, retained on first use and kept for the process (as the runtime
// keeps it until cudaDeviceReset, which gpumem never calls). Read without a lock once retained:
// SetDevice runs on every allocation of a resource that scopes its device.
CUresult primary_context(const driver_api& api, int ordinal, CUcontext* out) {
  constexpr int cached_devices = 64;
  static std::atomic<CUcontext> cached[cached_devices] = {};
  static std::mutex mutex;
  static std::unordered_map<int, CUcontext> retained;
  const bool cacheable = ordinal >= 0 && ordinal < cached_devices;
  if (cacheable) {
    if (CUcontext c = cached[ordinal].load(std::memory_order_acquire)) {
      *out = c;
      return CUDA_SUCCESS;
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  auto it = retained.find(ordinal);
  if (it != retained.end()) {
    *out = it->second;
    return CUDA_SUCCESS;
  }
  CUdevice device = 0;
  CUresult status = api.device_get(&device, ordinal);
  if (status != CUDA_SUCCESS) return status;
  CUcontext context = nullptr;
  status = api.primary_ctx_retain(&context, device);
  if (status != CUDA_SUCCESS) return status;
  retained.emplace(ordinal, context);
  if (cacheable) cached[ordinal].store(context, std::memory_order_release);
  *out = context;
  return CUDA_SUCCESS;
}

// The table when the driver loaded, else nullptr and its status in `status`.
const driver_api* ready(CUresult& status) {
  const driver_api& api = driver();
  status = api.status;
  return status == CUDA_SUCCESS ? &api : nullptr;
}

// A current context on this thread: the one there is, else device 0's primary context (the
// runtime's implicit initialisation).
CUresult ensure_context(const driver_api& api) {
  CUcontext current = nullptr;
  CUresult status = api.ctx_get_current(&current);
  if (status != CUDA_SUCCESS || current != nullptr) return status;
  status = primary_context(api, 0, &current);
  return status == CUDA_SUCCESS ? api.ctx_set_current(current) : status;
}

// The table with a current context, else nullptr and why in `status`.
const driver_api* in_context(CUresult& status) {
  const driver_api* api = ready(status);
  if (api == nullptr) return nullptr;
  status = ensure_context(*api);
  return status == CUDA_SUCCESS ? api : nullptr;
}

}  // namespace

#define GPUMEM_DRIVER_OR_RETURN(api)   \
  CUresult status_ = CUDA_SUCCESS;     \
  const driver_api* api = ready(status_); \
  if (api == nullptr) return status_
#define GPUMEM_CONTEXT_OR_RETURN(api)     \
  CUresult status_ = CUDA_SUCCESS;        \
  const driver_api* api = in_context(status_); \
  if (api == nullptr) return status_

CUresult GetDeviceCount(int* count) {
  *count = 0;
  GPUMEM_DRIVER_OR_RETURN(api);
  return api->device_get_count(count);
}

CUresult DriverGetVersion(int* version) {
  *version = driver().version;
  return CUDA_SUCCESS;
}

CUresult SetDevice(int device) {
  GPUMEM_DRIVER_OR_RETURN(api);
  CUcontext context = nullptr;
  const CUresult status = primary_context(*api, device, &context);
  return status == CUDA_SUCCESS ? api->ctx_set_current(context) : status;
}

CUresult GetDevice(int* device) {
  *device = 0;
  GPUMEM_DRIVER_OR_RETURN(api);
  CUcontext current = nullptr;
  const CUresult status = api->ctx_get_current(&current);
  if (status != CUDA_SUCCESS || current == nullptr) return status;  // none yet: device 0, as the runtime
  return api->ctx_get_device(device);
}

CUresult DeviceSynchronize() {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->ctx_synchronize();
}

CUresult DeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  GPUMEM_DRIVER_OR_RETURN(api);
  CUdevice d = 0;
  const CUresult status = api->device_get(&d, device);
  // The runtime's attribute numbers are the driver's (cudaDevAttrManagedMemory is
  // CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 83).
  return status == CUDA_SUCCESS ? api->device_get_attribute(value, static_cast<CUdevice_attribute>(attribute), d) : status;
}

CUresult DeviceGetP2PAttribute(int* value, cudaDeviceP2PAttr attribute, int from, int to) {
  GPUMEM_DRIVER_OR_RETURN(api);
  CUdevice src = 0, dst = 0;
  CUresult status = api->device_get(&src, from);
  if (status == CUDA_SUCCESS) status = api->device_get(&dst, to);
  return status == CUDA_SUCCESS
             ? api->device_get_p2p_attribute(value, static_cast<CUdevice_P2PAttribute>(attribute), src, dst)
             : status;
}

CUresult DeviceGetPCIBusId(char* id, int length, int device) {
  GPUMEM_DRIVER_OR_RETURN(api);
  CUdevice d = 0;
  const CUresult status = api->device_get(&d, device);
  return status == CUDA_SUCCESS ? api->device_get_pci_bus_id(id, length, d) : status;
}

CUresult DeviceCanAccessPeer(int* can, int device, int peer) {
  *can = 0;
  GPUMEM_DRIVER_OR_RETURN(api);
  CUdevice d = 0, p = 0;
  CUresult status = api->device_get(&d, device);
  if (status == CUDA_SUCCESS) status = api->device_get(&p, peer);
  return status == CUDA_SUCCESS ? api->device_can_access_peer(can, d, p) : status;
}

CUresult DeviceEnablePeerAccess(int peer, unsigned int flags) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  CUcontext peer_context = nullptr;
  const CUresult status = primary_context(*api, peer, &peer_context);
  return status == CUDA_SUCCESS ? api->ctx_enable_peer_access(peer_context, flags) : status;
}

CUresult MemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->mem_get_info(free_bytes, total_bytes);
}

CUresult Malloc(void** ptr, std::size_t bytes) {
  *ptr = nullptr;
  GPUMEM_CONTEXT_OR_RETURN(api);
  CUdeviceptr p = 0;
  const CUresult status = api->mem_alloc(&p, bytes);
  if (status == CUDA_SUCCESS) *ptr = reinterpret_cast<void*>(p);
  return status;
}

CUresult Free(void* ptr) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return ptr == nullptr ? CUDA_SUCCESS : api->mem_free(address(ptr));
}

CUresult MallocManaged(void** ptr, std::size_t bytes, unsigned int flags) {
  *ptr = nullptr;
  GPUMEM_CONTEXT_OR_RETURN(api);
  CUdeviceptr p = 0;
  const CUresult status = api->mem_alloc_managed(&p, bytes, flags);  // cudaMemAttachGlobal is CU_MEM_ATTACH_GLOBAL
  if (status == CUDA_SUCCESS) *ptr = reinterpret_cast<void*>(p);
  return status;
}

namespace {
// A location as the pre-12.2 forms take it: a device ordinal, or CU_DEVICE_CPU for the host.
bool as_ordinal(cudaMemLocation location, CUdevice& out) {
  if (location.type == cudaMemLocationTypeDevice) out = location.id;
  else if (location.type == cudaMemLocationTypeHost) out = CU_DEVICE_CPU;
  else return false;
  return true;
}
CUmemLocation as_driver(cudaMemLocation location) {
  CUmemLocation out{};
  out.type = static_cast<CUmemLocationType>(location.type);
  out.id = location.id;
  return out;
}
}  // namespace

CUresult MemAdvise(const void* ptr, std::size_t bytes, cudaMemoryAdvise advice, cudaMemLocation location) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  const auto how = static_cast<CUmem_advise>(advice);  // cudaMemAdviseSetReadMostly is CU_MEM_ADVISE_SET_READ_MOSTLY, ...
  if (api->mem_advise_v2 != nullptr) return api->mem_advise_v2(address(ptr), bytes, how, as_driver(location));
  CUdevice device = 0;
  if (!as_ordinal(location, device)) return CUDA_ERROR_NOT_SUPPORTED;
  return api->mem_advise_v1(address(ptr), bytes, how, device);
}

CUresult MemPrefetchAsync(const void* ptr, std::size_t bytes, cudaMemLocation location, unsigned int flags,
                          cudaStream_t stream) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  if (api->mem_prefetch_v2 != nullptr) return api->mem_prefetch_v2(address(ptr), bytes, as_driver(location), flags, stream);
  CUdevice device = 0;
  if (flags != 0 || !as_ordinal(location, device)) return CUDA_ERROR_NOT_SUPPORTED;
  return api->mem_prefetch_v1(address(ptr), bytes, device, stream);
}

CUresult HostAlloc(void** ptr, std::size_t bytes, unsigned int flags) {
  *ptr = nullptr;
  GPUMEM_CONTEXT_OR_RETURN(api);
  // cudaHostAllocPortable/Mapped are CU_MEMHOSTALLOC_PORTABLE/DEVICEMAP.
  return api->mem_host_alloc(ptr, bytes, flags);
}

CUresult FreeHost(void* ptr) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->mem_free_host(ptr);
}

CUresult HostGetDevicePointer(void** device_ptr, void* host_ptr, unsigned int flags) {
  *device_ptr = nullptr;
  GPUMEM_CONTEXT_OR_RETURN(api);
  CUdeviceptr p = 0;
  const CUresult status = api->mem_host_get_device_pointer(&p, host_ptr, flags);
  if (status == CUDA_SUCCESS) *device_ptr = reinterpret_cast<void*>(p);
  return status;
}

CUresult HostRegister(void* ptr, std::size_t bytes, unsigned int flags) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->mem_host_register(ptr, bytes, flags);  // cudaHostRegisterPortable is CU_MEMHOSTREGISTER_PORTABLE
}

CUresult HostUnregister(void* ptr) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->mem_host_unregister(ptr);
}

CUresult MemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->memcpy_async(address(dst), address(src), bytes, stream);
}

CUresult StreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  *stream = nullptr;
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->stream_create(stream, flags);  // cudaStreamNonBlocking is CU_STREAM_NON_BLOCKING
}

CUresult StreamDestroy(cudaStream_t stream) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->stream_destroy(stream);
}

CUresult StreamSynchronize(cudaStream_t stream) {
  GPUMEM_CONTEXT_OR_RETURN(api);  // the legacy stream (nullptr) is the current context's
  return api->stream_synchronize(stream);
}

CUresult StreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->stream_wait_event(stream, event, flags);
}

CUresult StreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->stream_begin_capture(stream, static_cast<CUstreamCaptureMode>(mode));
}

CUresult StreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->stream_end_capture(stream, graph);
}

CUresult GraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->graph_instantiate(exec, graph, flags);
}

CUresult GraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->graph_launch(exec, stream);
}

CUresult GraphExecDestroy(cudaGraphExec_t exec) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->graph_exec_destroy(exec);
}

CUresult GraphDestroy(cudaGraph_t graph) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->graph_destroy(graph);
}

CUresult EventCreate(cudaEvent_t* event) { return EventCreateWithFlags(event, CU_EVENT_DEFAULT); }

CUresult EventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  *event = nullptr;
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->event_create(event, flags);  // cudaEventDisableTiming is CU_EVENT_DISABLE_TIMING
}

CUresult EventRecord(cudaEvent_t event, cudaStream_t stream) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->event_record(event, stream);
}

CUresult EventQuery(cudaEvent_t event) {
  GPUMEM_DRIVER_OR_RETURN(api);
  return api->event_query(event);
}

CUresult EventSynchronize(cudaEvent_t event) {
  GPUMEM_DRIVER_OR_RETURN(api);
  return api->event_synchronize(event);
}

CUresult EventDestroy(cudaEvent_t event) {
  GPUMEM_DRIVER_OR_RETURN(api);
  return api->event_destroy(event);
}

CUresult EventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  GPUMEM_DRIVER_OR_RETURN(api);
  return api->event_elapsed_time(ms, start, end);
}

CUresult MemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props) {
  *pool = nullptr;
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->mem_pool_create(pool, reinterpret_cast<const CUmemPoolProps*>(props));
}

CUresult MemPoolDestroy(cudaMemPool_t pool) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->mem_pool_destroy(pool);
}

CUresult MemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attribute, void* value) {
  GPUMEM_DRIVER_OR_RETURN(api);
  return api->mem_pool_set_attribute(pool, static_cast<CUmemPool_attribute>(attribute), value);
}

CUresult MemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attribute, void* value) {
  GPUMEM_DRIVER_OR_RETURN(api);
  return api->mem_pool_get_attribute(pool, static_cast<CUmemPool_attribute>(attribute), value);
}

CUresult MemPoolSetAccess(cudaMemPool_t pool, const cudaMemAccessDesc* access, std::size_t count) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->mem_pool_set_access(pool, reinterpret_cast<const CUmemAccessDesc*>(access), count);
}

CUresult MemPoolTrimTo(cudaMemPool_t pool, std::size_t bytes_to_keep) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->mem_pool_trim_to(pool, bytes_to_keep);
}

CUresult MallocFromPoolAsync(void** ptr, std::size_t bytes, cudaMemPool_t pool, cudaStream_t stream) {
  *ptr = nullptr;
  GPUMEM_CONTEXT_OR_RETURN(api);
  CUdeviceptr p = 0;
  const CUresult status = api->mem_alloc_from_pool_async(&p, bytes, pool, stream);
  if (status == CUDA_SUCCESS) *ptr = reinterpret_cast<void*>(p);
  return status;
}

CUresult FreeAsync(void* ptr, cudaStream_t stream) {
  GPUMEM_CONTEXT_OR_RETURN(api);
  return api->mem_free_async(address(ptr), stream);
}

const char* GetErrorName(CUresult status) noexcept { return driver_error_name(status); }
const char* GetErrorString(CUresult status) noexcept { return driver_error_string(status); }

}  // namespace gpumem::detail::cu

#endif  // GPUMEM_WITH_CUDA
