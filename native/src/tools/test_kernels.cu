#include "gpumem/test_kernels.hpp"

#include <cuda_runtime.h>

#include "core/cuda_runtime_check.hpp"

namespace gpumem::kernels {
namespace {

constexpr int threads = 256;

__global__ void fill_u32_kernel(std::uint32_t* p, std::size_t n, std::uint32_t value) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    p[i] = value;
}

__device__ std::uint64_t global_time_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void sum_u32_kernel(const std::uint32_t* p, std::size_t n, unsigned long long* out, std::uint64_t spin_ns) {
  if (spin_ns > 0) {
    std::uint64_t until = global_time_ns() + spin_ns;
    while (global_time_ns() < until) __nanosleep(1000);
  }
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    local += p[i];
  __shared__ unsigned long long block_sum;
  if (threadIdx.x == 0) block_sum = 0;
  __syncthreads();
  atomicAdd(&block_sum, local);
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(out, block_sum);
}

int grid_for(std::size_t n) {
  std::size_t blocks = (n + threads - 1) / threads;
  if (blocks > 4096) blocks = 4096;
  return blocks == 0 ? 1 : static_cast<int>(blocks);
}

void check_launch(const char* what) { detail::check_cuda(cudaGetLastError(), what); }

}  // namespace

void fill_u32(void* ptr, std::size_t count, std::uint32_t value, stream_handle stream) {
  fill_u32_kernel<<<grid_for(count), threads, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<std::uint32_t*>(ptr),
                                                                                     count, value);
  check_launch("fill_u32 launch");
}

void fill_u32_on_device(int device, void* ptr, std::size_t count, std::uint32_t value) {
  detail::device_scope scope(device);
  fill_u32_kernel<<<grid_for(count), threads>>>(static_cast<std::uint32_t*>(ptr), count, value);
  check_launch("fill_u32 launch (peer)");
  detail::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (peer fill)");
}

void spin_then_sum_u32(const void* ptr, std::size_t count, std::uint64_t spin_ns, void* out, stream_handle stream) {
  sum_u32_kernel<<<grid_for(count), threads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const std::uint32_t*>(ptr), count, static_cast<unsigned long long*>(out), spin_ns);
  check_launch("spin_then_sum_u32 launch");
}

}  // namespace gpumem::kernels
