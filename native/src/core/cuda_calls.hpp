// The CUDA runtime calls gpumem_core makes, on the driver API (resources/cuda_driver.hpp) with the
// runtime's semantics and the runtime's argument order: detail::cu::Malloc(&p, bytes) is
// cudaMalloc(&p, bytes). gpumem_core and libgpumem_torch link no CUDA runtime; the types are the
// header-only ones of <driver_types.h> (cudaStream_t is CUstream, cudaEvent_t is CUevent, ...). Each
// call returns the driver's CUresult.
//
// The runtime's current device is the calling thread's current context: SetDevice retains the
// device's primary context (kept for the process, as the runtime keeps it) and makes it current;
// a call that needs a context on a thread that has none makes device 0's primary context current,
// as the runtime's first call on a thread does. PyTorch's runtime uses the same primary contexts,
// so memory and streams are shared with it. A private header (never included by public headers).
#pragma once
#ifdef GPUMEM_WITH_CUDA
#include <cuda.h>
#include <driver_types.h>

#include <cstddef>

namespace gpumem::detail::cu {

// Devices and contexts.
CUresult GetDeviceCount(int* count);  // 0 and the reason's status where there is no usable driver
CUresult DriverGetVersion(int* version);  // 0 without a driver, as the runtime says
CUresult SetDevice(int device);
CUresult GetDevice(int* device);
CUresult DeviceSynchronize();
CUresult DeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device);
CUresult DeviceGetP2PAttribute(int* value, cudaDeviceP2PAttr attribute, int from, int to);
CUresult DeviceGetPCIBusId(char* id, int length, int device);
CUresult DeviceCanAccessPeer(int* can, int device, int peer);
CUresult DeviceEnablePeerAccess(int peer, unsigned int flags);  // from the current device
CUresult MemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes);

// Memory.
CUresult Malloc(void** ptr, std::size_t bytes);
CUresult Free(void* ptr);  // nullptr: nothing, after making a context current (as the runtime)
CUresult MallocManaged(void** ptr, std::size_t bytes, unsigned int flags);
// The location form (CUDA 12.2 drivers on); on older drivers a device or the host only
// (CUDA_ERROR_NOT_SUPPORTED for another location).
CUresult MemAdvise(const void* ptr, std::size_t bytes, cudaMemoryAdvise advice, cudaMemLocation location);
CUresult MemPrefetchAsync(const void* ptr, std::size_t bytes, cudaMemLocation location, unsigned int flags,
                          cudaStream_t stream);
CUresult HostAlloc(void** ptr, std::size_t bytes, unsigned int flags);
CUresult FreeHost(void* ptr);
CUresult HostGetDevicePointer(void** device_ptr, void* host_ptr, unsigned int flags);
CUresult HostRegister(void* ptr, std::size_t bytes, unsigned int flags);
CUresult HostUnregister(void* ptr);
// With unified addressing the driver reads the direction from the pointers: `kind` is the caller's
// statement of it, kept for the reader.
CUresult MemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t stream);

// Streams, graphs, events.
CUresult StreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
CUresult StreamDestroy(cudaStream_t stream);
CUresult StreamSynchronize(cudaStream_t stream);
CUresult StreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags);
CUresult StreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
CUresult StreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
CUresult GraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags);
CUresult GraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
CUresult GraphExecDestroy(cudaGraphExec_t exec);
CUresult GraphDestroy(cudaGraph_t graph);
CUresult EventCreate(cudaEvent_t* event);
CUresult EventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
CUresult EventRecord(cudaEvent_t event, cudaStream_t stream);
CUresult EventQuery(cudaEvent_t event);  // CUDA_ERROR_NOT_READY while work is pending
CUresult EventSynchronize(cudaEvent_t event);
CUresult EventDestroy(cudaEvent_t event);
CUresult EventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

// Stream-ordered memory pools.
CUresult MemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props);
CUresult MemPoolDestroy(cudaMemPool_t pool);
CUresult MemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attribute, void* value);
CUresult MemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attribute, void* value);
CUresult MemPoolSetAccess(cudaMemPool_t pool, const cudaMemAccessDesc* access, std::size_t count);
CUresult MemPoolTrimTo(cudaMemPool_t pool, std::size_t bytes_to_keep);
CUresult MallocFromPoolAsync(void** ptr, std::size_t bytes, cudaMemPool_t pool, cudaStream_t stream);
CUresult FreeAsync(void* ptr, cudaStream_t stream);

// "CUDA_ERROR_OUT_OF_MEMORY" and "out of memory", also without a driver.
const char* GetErrorName(CUresult status) noexcept;
const char* GetErrorString(CUresult status) noexcept;

}  // namespace gpumem::detail::cu

#endif  // GPUMEM_WITH_CUDA
