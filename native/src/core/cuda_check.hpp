// CUDA error handling shared by the CUDA resources (never included by public headers), over the
// driver (cuda_calls.hpp): gpumem_core links no CUDA runtime. Code of the Node addon that calls the
// runtime (kernels, copies) includes cuda_runtime_check.hpp instead.
#pragma once
#ifdef GPUMEM_WITH_CUDA
#include <cuda.h>
#include <driver_types.h>

#include <string>

#include "core/cuda_calls.hpp"
#include "gpumem/errors.hpp"

namespace gpumem::detail {

// Throws cuda_error for a failed call: "<what> failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
// The driver keeps no sticky error for a failed call to clear, unlike the runtime.
inline void check_cuda(CUresult status, const char* what) {
  if (status == CUDA_SUCCESS) return;
  throw cuda_error(std::string(what) + " failed: " + cu::GetErrorName(status) + " (" + cu::GetErrorString(status) + ")",
                   static_cast<int>(status), cu::GetErrorName(status));
}

inline bool is_out_of_memory(CUresult status) { return status == CUDA_ERROR_OUT_OF_MEMORY; }

// Makes `device` current for the scope and restores the previous one (calls from Node run on
// threads whose current device the caller does not control).
class device_scope {
 public:
  explicit device_scope(int device) {
    cu::GetDevice(&previous_);
    if (previous_ != device) check_cuda(cu::SetDevice(device), "cudaSetDevice");
    else previous_ = -1;
  }
  ~device_scope() {
    if (previous_ >= 0) cu::SetDevice(previous_);
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
