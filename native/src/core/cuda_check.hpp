// CUDA error handling shared by the CUDA resources (never included by public headers).
#pragma once
#ifdef GPUMEM_WITH_CUDA
#include <cuda_runtime_api.h>

#include <string>

#include "gpumem/errors.hpp"

namespace gpumem::detail {

// Throws cuda_error for a failed call, after clearing the sticky error so later calls work.
inline void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();
  throw cuda_error(std::string(what) + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")",
                   static_cast<int>(status), cudaGetErrorName(status));
}

inline bool is_out_of_memory(cudaError_t status) { return status == cudaErrorMemoryAllocation; }

// Makes `device` current for the scope and restores the previous one (calls from Node run on
// threads whose current device the caller does not control).
class device_scope {
 public:
  explicit device_scope(int device) {
    cudaGetDevice(&previous_);
    if (previous_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice");
    else previous_ = -1;
  }
  ~device_scope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;

 private:
  int previous_ = -1;
};

inline cudaMemLocation device_location(int device) {
  cudaMemLocation loc{};
  loc.type = cudaMemLocationTypeDevice;
  loc.id = device;
  return loc;
}

inline cudaMemLocation host_location() {
  cudaMemLocation loc{};
  loc.type = cudaMemLocationTypeHost;
  loc.id = 0;
  return loc;
}

}  // namespace gpumem::detail
#endif
