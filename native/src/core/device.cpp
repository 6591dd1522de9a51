#include "gpumem/device.hpp"

#include <dlfcn.h>

#include <cstring>

#include "gpumem/errors.hpp"
#include "gpumem/stream_ordering.hpp"
#include "cuda_check.hpp"
#include "resources/cuda_driver.hpp"

namespace gpumem {

#ifdef GPUMEM_WITH_CUDA
using detail::check_cuda;
namespace {
cudaStream_t as_stream(stream_handle s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }
}  // namespace

bool built_with_cuda() noexcept { return true; }

int device_count() noexcept {
  int n = 0;
  if (detail::cu::GetDeviceCount(&n) != CUDA_SUCCESS) {
    return 0;
  }
  return n;
}

int driver_version() noexcept {
  int v = 0;
  (void)detail::cu::DriverGetVersion(&v);
  return v;
}

std::string device_status() {
  int n = 0;
  const CUresult status = detail::cu::GetDeviceCount(&n);
  if (status != CUDA_SUCCESS) {
    // Without a usable driver the text is the driver layer's reason ("no CUDA driver: ...").
    return std::string(detail::cu::GetErrorString(status)) + " (" + detail::cu::GetErrorName(status) + ")";
  }
  return n == 0 ? "no CUDA device" : "";
}

device_properties get_device_properties(int device) {
  // The runtime's cudaGetDeviceProperties is the driver's attributes, one call each.
  const auto attribute = [device](cudaDeviceAttr which) {
    int value = 0;
    check_cuda(detail::cu::DeviceGetAttribute(&value, which, device), "cudaDeviceGetAttribute");
    return value;
  };
  const detail::driver_api& api = detail::driver();
  CUdevice dev = 0;
  check_cuda(api.status, "cudaGetDeviceProperties");
  check_cuda(api.device_get(&dev, device), "cuDeviceGet");
  char name[256] = {};
  check_cuda(api.device_get_name(name, sizeof name, dev), "cuDeviceGetName");
  std::size_t total = 0;
  check_cuda(api.device_total_mem(&total, dev), "cuDeviceTotalMem");
  device_properties out;
  out.index = device;
  out.name = name;
  out.compute_major = attribute(cudaDevAttrComputeCapabilityMajor);
  out.compute_minor = attribute(cudaDevAttrComputeCapabilityMinor);
  out.total_memory = total;
  out.multiprocessors = attribute(cudaDevAttrMultiProcessorCount);
  out.managed_memory = attribute(cudaDevAttrManagedMemory) != 0;
  out.concurrent_managed_access = attribute(cudaDevAttrConcurrentManagedAccess) != 0;
  out.memory_pools = attribute(cudaDevAttrMemoryPoolsSupported) != 0;
  out.pci_bus_id = attribute(cudaDevAttrPciBusId);
  out.l2_cache_bytes = static_cast<std::uint64_t>(attribute(cudaDevAttrL2CacheSize));
  return out;
}

memory_info get_memory_info(int device) {
  detail::device_scope scope(device);
  std::size_t free_bytes = 0, total_bytes = 0;
  check_cuda(detail::cu::MemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  return {free_bytes, total_bytes};
}

stream_handle create_stream(int device) {
  detail::device_scope scope(device);
  cudaStream_t s = nullptr;
  check_cuda(detail::cu::StreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return s;
}

void destroy_stream(stream_handle stream) noexcept {
  if (stream == nullptr) return;
  // Everything queued on the stream finishes first, so that the resources told below may treat the
  // memory freed on it as idle; then they forget the handle, before it becomes invalid (or reused).
  // A failed synchronisation (a context already broken by a fault) does not stop the destroy.
  (void)detail::cu::StreamSynchronize(as_stream(stream));
  notify_stream_destroyed(stream);
  (void)detail::cu::StreamDestroy(as_stream(stream));
}

void synchronize_stream(stream_handle stream) { check_cuda(detail::cu::StreamSynchronize(as_stream(stream)), "cudaStreamSynchronize"); }

void synchronize_device(int device) {
  detail::device_scope scope(device);
  check_cuda(detail::cu::DeviceSynchronize(), "cudaDeviceSynchronize");
}

void set_current_device(int device) { check_cuda(detail::cu::SetDevice(device), "cudaSetDevice"); }

void* create_event(int device) {
  detail::device_scope scope(device);
  cudaEvent_t e = nullptr;
  check_cuda(detail::cu::EventCreate(&e), "cudaEventCreate");
  return e;
}

void destroy_event(void* event) noexcept {
  if (event != nullptr) (void)detail::cu::EventDestroy(as_event(event));
}

void record_event(void* event, stream_handle stream) {
  check_cuda(detail::cu::EventRecord(as_event(event), as_stream(stream)), "cudaEventRecord");
}

void synchronize_event(void* event) { check_cuda(detail::cu::EventSynchronize(as_event(event)), "cudaEventSynchronize"); }

bool query_event(void* event) {
  CUresult status = detail::cu::EventQuery(as_event(event));
  if (status == CUDA_ERROR_NOT_READY) {
    return false;
  }
  check_cuda(status, "cudaEventQuery");
  return true;
}

float elapsed_ms(void* start, void* end) {
  float ms = 0;
  check_cuda(detail::cu::EventElapsedTime(&ms, as_event(start), as_event(end)), "cudaEventElapsedTime");
  return ms;
}

void begin_capture(stream_handle stream) {
  if (stream == nullptr) throw invalid_state("CUDA Graph capture needs a stream other than the default stream");
  check_cuda(detail::cu::StreamBeginCapture(as_stream(stream), cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
}

void* end_capture(stream_handle stream) {
  cudaGraph_t graph = nullptr;
  check_cuda(detail::cu::StreamEndCapture(as_stream(stream), &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  CUresult status = detail::cu::GraphInstantiate(&exec, graph, 0);
  detail::cu::GraphDestroy(graph);
  check_cuda(status, "cudaGraphInstantiate");
  return exec;
}

void launch_graph(void* graph_exec, stream_handle stream) {
  check_cuda(detail::cu::GraphLaunch(static_cast<cudaGraphExec_t>(graph_exec), as_stream(stream)), "cudaGraphLaunch");
}

void destroy_graph(void* graph_exec) noexcept {
  if (graph_exec != nullptr) (void)detail::cu::GraphExecDestroy(static_cast<cudaGraphExec_t>(graph_exec));
}

void copy_to(void* dst, memory_kind dst_kind, const void* src, std::size_t bytes, stream_handle stream) {
  if (dst_kind == memory_kind::host) {
    std::memcpy(dst, src, bytes);
    return;
  }
  check_cuda(detail::cu::MemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream)), "cudaMemcpyAsync");
  check_cuda(detail::cu::StreamSynchronize(as_stream(stream)), "cudaStreamSynchronize");
}

void copy_from(void* dst, const void* src, memory_kind src_kind, std::size_t bytes, stream_handle stream) {
  if (src_kind == memory_kind::host) {
    std::memcpy(dst, src, bytes);
    return;
  }
  check_cuda(detail::cu::MemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream)), "cudaMemcpyAsync");
  check_cuda(detail::cu::StreamSynchronize(as_stream(stream)), "cudaStreamSynchronize");
}

#else  // host-only build

namespace {
[[noreturn]] void no_cuda() { throw invalid_state("gpumem was built without CUDA (no CUDA toolkit at build time)"); }
}  // namespace

bool built_with_cuda() noexcept { return false; }
int device_count() noexcept { return 0; }
std::string device_status() { return "gpumem was built without CUDA (no CUDA toolkit at build time)"; }
int driver_version() noexcept { return 0; }
device_properties get_device_properties(int) { no_cuda(); }
memory_info get_memory_info(int) { no_cuda(); }
stream_handle create_stream(int) { no_cuda(); }
void destroy_stream(stream_handle stream) noexcept { notify_stream_destroyed(stream); }
void synchronize_stream(stream_handle) {}
void synchronize_device(int) {}
void set_current_device(int) { no_cuda(); }
void* create_event(int) { no_cuda(); }
void destroy_event(void*) noexcept {}
void record_event(void*, stream_handle) { no_cuda(); }
void synchronize_event(void*) { no_cuda(); }
bool query_event(void*) { no_cuda(); }
float elapsed_ms(void*, void*) { no_cuda(); }
void begin_capture(stream_handle) { no_cuda(); }
void* end_capture(stream_handle) { no_cuda(); }
void launch_graph(void*, stream_handle) { no_cuda(); }
void destroy_graph(void*) noexcept {}
void copy_to(void* dst, memory_kind dst_kind, const void* src, std::size_t bytes, stream_handle) {
  if (dst_kind != memory_kind::host) no_cuda();
  std::memcpy(dst, src, bytes);
}
void copy_from(void* dst, const void* src, memory_kind src_kind, std::size_t bytes, stream_handle) {
  if (src_kind != memory_kind::host) no_cuda();
  std::memcpy(dst, src, bytes);
}

#endif

bool can_load_library(const std::string& name, std::string* error) {
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    if (error != nullptr) {
      const char* why = dlerror();
      *error = why != nullptr ? why : "dlopen failed";
    }
    return false;
  }
  dlclose(handle);
  return true;
}

}  // namespace gpumem
