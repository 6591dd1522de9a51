// Which GPUs the trainer's kernels were built for, and whether a device can run them: a build for
// sm_90 only loads on an H100 but not on an A100, and the launch would fail with "no kernel image".
#include <cuda_runtime.h>

#include "cuda_architectures.hpp"
#include "ops.hpp"

namespace gpumem::ops {
namespace {

__global__ void kernel_image_probe() {}

}  // namespace

std::string built_cuda_architectures() { return GPUMEM_CUDA_ARCHITECTURES; }

int runtime_version() noexcept {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) cudaGetLastError();
  return v;
}

kernel_image_info kernel_image(int device) {
  kernel_image_info info;
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) {
    cudaGetLastError();
    info.error = "no CUDA device";
    return info;
  }
  cudaError_t status = cudaSetDevice(device);
  cudaFuncAttributes attributes{};
  if (status == cudaSuccess) status = cudaFuncGetAttributes(&attributes, kernel_image_probe);
  cudaSetDevice(previous);
  if (status != cudaSuccess) {
    cudaGetLastError();  // not sticky, but leave nothing behind for the next call
    info.error = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
    return info;
  }
  info.runnable = true;
  info.binary_version = attributes.binaryVersion;
  info.ptx_version = attributes.ptxVersion;
  return info;
}

}  // namespace gpumem::ops
