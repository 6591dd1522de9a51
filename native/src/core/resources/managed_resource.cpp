#include "gpumem/managed_resource.hpp"

#include "../cuda_check.hpp"

namespace gpumem {

#ifdef GPUMEM_WITH_CUDA

namespace {
cudaMemLocation advise_location(advise_target target, int device) {
  return target == advise_target::host ? detail::host_location() : detail::device_location(device);
}
}  // namespace

managed_resource::managed_resource(int device, managed_options options) : device_(device), options_(options) {
  detail::device_scope scope(device);
  int managed = 0;
  detail::check_cuda(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, device), "cudaDeviceGetAttribute");
  if (!managed) throw invalid_state("uvm: device " + std::to_string(device) + " does not support managed memory");
}

managed_resource::~managed_resource() {
  for (auto& [ptr, reserved] : table_.take_all()) cudaFree(ptr);
}

void* managed_resource::do_allocate(std::size_t bytes, stream_handle) {
  detail::device_scope scope(device_);
  void* ptr = nullptr;
  cudaError_t status = cudaMallocManaged(&ptr, bytes, cudaMemAttachGlobal);
  if (detail::is_out_of_memory(status)) {
    cudaGetLastError();
    table_.count_oom();
    throw out_of_memory("uvm: cudaMallocManaged of " + format_bytes(bytes) + " failed: out of memory", bytes,
                        table_.stats());
  }
  detail::check_cuda(status, "cudaMallocManaged");
  try {
    if (options_.preferred_location != advise_target::none) {
      detail::check_cuda(cudaMemAdvise(ptr, bytes, cudaMemAdviseSetPreferredLocation,
                                       advise_location(options_.preferred_location, device_)),
                         "cudaMemAdvise(SetPreferredLocation)");
    }
    if (options_.accessed_by != advise_target::none) {
      detail::check_cuda(
          cudaMemAdvise(ptr, bytes, cudaMemAdviseSetAccessedBy, advise_location(options_.accessed_by, device_)),
          "cudaMemAdvise(SetAccessedBy)");
    }
    if (options_.read_mostly) {
      detail::check_cuda(cudaMemAdvise(ptr, bytes, cudaMemAdviseSetReadMostly, detail::device_location(device_)),
                         "cudaMemAdvise(SetReadMostly)");
    }
  } catch (...) {
    cudaFree(ptr);
    throw;
  }
  table_.add(ptr, bytes, bytes);
  return ptr;
}

void managed_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle) {
  table_.remove(ptr, bytes);
  detail::device_scope scope(device_);
  if (cudaFree(ptr) != cudaSuccess) cudaGetLastError();
}

bool managed_resource::do_prefetch(void* ptr, std::size_t bytes, location to, stream_handle stream) {
  std::size_t size = table_.size_of(ptr);
  if (size == 0) throw_unknown_pointer(ptr);
  if (bytes > size) throw_size_mismatch(ptr, bytes, size);
  detail::device_scope scope(device_);
  cudaMemLocation where = to == location::device ? detail::device_location(device_) : detail::host_location();
  detail::check_cuda(cudaMemPrefetchAsync(ptr, bytes, where, 0, static_cast<cudaStream_t>(stream)),
                     "cudaMemPrefetchAsync");
  return true;
}

#else

managed_resource::managed_resource(int device, managed_options options) : device_(device), options_(options) {
  throw invalid_state("uvm: gpumem was built without CUDA");
}
managed_resource::~managed_resource() = default;
void* managed_resource::do_allocate(std::size_t, stream_handle) { throw invalid_state("uvm: built without CUDA"); }
void managed_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle) { table_.remove(ptr, bytes); }
bool managed_resource::do_prefetch(void*, std::size_t, location, stream_handle) { return false; }

#endif

}  // namespace gpumem
