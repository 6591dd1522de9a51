#include "gpumem/device.hpp"

#include <dlfcn.h>

#include <cstring>

#include "gpumem/errors.hpp"
#include "gpumem/stream_ordering.hpp"
#include "cuda_check.hpp"

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
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

int driver_version() noexcept {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess) cudaGetLastError();
  return v;
}

namespace {
// A driver too old for the CUDA runtime linked in, in words that name the requirement: the oldest
// Linux driver of the runtime's major release (CUDA's "Minimum Required Driver Version" table).
std::string insufficient_driver() {
  const int major = CUDART_VERSION / 1000;
  std::string out = "the NVIDIA driver is older than CUDA " + std::to_string(major) + " needs";
  if (major == 13) out += " (580 or later)";
  if (major == 12) out += " (525 or later)";
  const int driver = driver_version();
  if (driver > 0) out += "; it supports CUDA " + std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10);
  return out + " (cudaErrorInsufficientDriver)";
}
}  // namespace

std::string device_status() {
  int n = 0;
  cudaError_t status = cudaGetDeviceCount(&n);
  if (status != cudaSuccess) {
    cudaGetLastError();
    if (status == cudaErrorInsufficientDriver && driver_version() > 0) return insufficient_driver();
    return std::string(cudaGetErrorString(status)) + " (" + cudaGetErrorName(status) + ")";
  }
  return n == 0 ? "no CUDA device" : "";
}

int runtime_version() noexcept {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) cudaGetLastError();
  return v;
}

device_properties get_device_properties(int device) {
  cudaDeviceProp p{};
  check_cuda(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  device_properties out;
  out.index = device;
  out.name = p.name;
  out.compute_major = p.major;
  out.compute_minor = p.minor;
  out.total_memory = p.totalGlobalMem;
  out.multiprocessors = p.multiProcessorCount;
  out.managed_memory = p.managedMemory != 0;
  out.concurrent_managed_access = p.concurrentManagedAccess != 0;
  int pools = 0;
  check_cuda(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device), "cudaDeviceGetAttribute");
  out.memory_pools = pools != 0;
  out.pci_bus_id = p.pciBusID;
  out.l2_cache_bytes = static_cast<std::uint64_t>(p.l2CacheSize);
  return out;
}

memory_info get_memory_info(int device) {
  detail::device_scope scope(device);
  std::size_t free_bytes = 0, total_bytes = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  return {free_bytes, total_bytes};
}

stream_handle create_stream(int device) {
  detail::device_scope scope(device);
  cudaStream_t s = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return s;
}

void destroy_stream(stream_handle stream) noexcept {
  if (stream == nullptr) return;
  // Everything queued on the stream finishes first, so that the resources told below may treat the
  // memory freed on it as idle; then they forget the handle, before it becomes invalid (or reused).
  // A failed synchronisation (a context already broken by a fault) does not stop the destroy.
  if (cudaStreamSynchronize(as_stream(stream)) != cudaSuccess) cudaGetLastError();
  notify_stream_destroyed(stream);
  if (cudaStreamDestroy(as_stream(stream)) != cudaSuccess) cudaGetLastError();
}

void synchronize_stream(stream_handle stream) { check_cuda(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize"); }

void synchronize_device(int device) {
  detail::device_scope scope(device);
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

void set_current_device(int device) { check_cuda(cudaSetDevice(device), "cudaSetDevice"); }

void* create_event(int device) {
  detail::device_scope scope(device);
  cudaEvent_t e = nullptr;
  check_cuda(cudaEventCreate(&e), "cudaEventCreate");
  return e;
}

void destroy_event(void* event) noexcept {
  if (event != nullptr && cudaEventDestroy(as_event(event)) != cudaSuccess) cudaGetLastError();
}

void record_event(void* event, stream_handle stream) {
  check_cuda(cudaEventRecord(as_event(event), as_stream(stream)), "cudaEventRecord");
}

void synchronize_event(void* event) { check_cuda(cudaEventSynchronize(as_event(event)), "cudaEventSynchronize"); }

bool query_event(void* event) {
  cudaError_t status = cudaEventQuery(as_event(event));
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  check_cuda(status, "cudaEventQuery");
  return true;
}

float elapsed_ms(void* start, void* end) {
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, as_event(start), as_event(end)), "cudaEventElapsedTime");
  return ms;
}

void begin_capture(stream_handle stream) {
  if (stream == nullptr) throw invalid_state("CUDA Graph capture needs a stream other than the default stream");
  check_cuda(cudaStreamBeginCapture(as_stream(stream), cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
}

void* end_capture(stream_handle stream) {
  cudaGraph_t graph = nullptr;
  check_cuda(cudaStreamEndCapture(as_stream(stream), &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check_cuda(status, "cudaGraphInstantiate");
  return exec;
}

void launch_graph(void* graph_exec, stream_handle stream) {
  check_cuda(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph_exec), as_stream(stream)), "cudaGraphLaunch");
}

void destroy_graph(void* graph_exec) noexcept {
  if (graph_exec != nullptr && cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph_exec)) != cudaSuccess) cudaGetLastError();
}

void copy_to(void* dst, memory_kind dst_kind, const void* src, std::size_t bytes, stream_handle stream) {
  if (dst_kind == memory_kind::host) {
    std::memcpy(dst, src, bytes);
    return;
  }
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream)), "cudaMemcpyAsync");
  check_cuda(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize");
}

void copy_from(void* dst, const void* src, memory_kind src_kind, std::size_t bytes, stream_handle stream) {
  if (src_kind == memory_kind::host) {
    std::memcpy(dst, src, bytes);
    return;
  }
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream)), "cudaMemcpyAsync");
  check_cuda(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize");
}

#else  // host-only build

namespace {
[[noreturn]] void no_cuda() { throw invalid_state("gpumem was built without CUDA (no CUDA toolkit at build time)"); }
}  // namespace

bool built_with_cuda() noexcept { return false; }
int device_count() noexcept { return 0; }
std::string device_status() { return "gpumem was built without CUDA (no CUDA toolkit at build time)"; }
int driver_version() noexcept { return 0; }
int runtime_version() noexcept { return 0; }
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
