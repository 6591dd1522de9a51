// Error handling for the Node addon's code that calls the CUDA runtime itself (the trainer's
// kernels, cuBLAS, the communicators, the link benchmark and test kernels): gpumem_ops,
// gpumem_comm and gpumem_tools, never gpumem_core or libgpumem_torch (which link no runtime).
#pragma once
#ifdef GPUMEM_WITH_CUDA
#include <cuda_runtime_api.h>

#include <string>

#include "core/cuda_check.hpp"
#include "gpumem/errors.hpp"

namespace gpumem::detail {

// Throws cuda_error for a failed runtime call, after clearing the sticky error so later calls work.
inline void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();
  throw cuda_error(std::string(what) + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")",
                   static_cast<int>(status), cudaGetErrorName(status));
}

inline bool is_out_of_memory(cudaError_t status) { return status == cudaErrorMemoryAllocation; }

}  // namespace gpumem::detail
#endif
