// Helpers shared by the ops' CUDA files: launch geometry, launch checks, stream-ordered scratch.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/cuda_runtime_check.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/stream.hpp"
#include "ops.hpp"
#include "workspace.hpp"

namespace gpumem::ops::gpu {

constexpr int block_threads = 256;

inline cudaStream_t as_cuda(stream_handle s) { return static_cast<cudaStream_t>(s); }

// Blocks for a grid-stride loop over n items (at least 1, at most 8 per SM's worth of work).
inline unsigned grid_for(std::uint64_t n, int threads = block_threads) {
  std::uint64_t blocks = (n + threads - 1) / threads;
  if (blocks > 65535ull * 8) blocks = 65535ull * 8;
  return blocks == 0 ? 1u : static_cast<unsigned>(blocks);
}

inline void check_launch(const char* what) { detail::check_cuda(cudaGetLastError(), what); }

inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

#define GPUMEM_GRID_STRIDE(i, n)                                                          \
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += std::uint64_t(gridDim.x) * blockDim.x)

// Temporary device memory for one launch sequence (the per-block partial sums of the
// deterministic reductions), in stream order. Work on one stream runs in order, so every op queued
// on a stream reuses that stream's buffer. The buffer is the scratch part of the workspace bound to
// the stream (workspace.hpp): memory from the caller's allocator, whose address never changes while
// bound (so a CUDA Graph capture records it). `bytes` never exceeds scratch_bound_bytes (bias.cu
// and loss.cu cap their grids for that); a request over the bound workspace throws rather than
// write past it.
//
// With no workspace bound (ops called directly), the stream keeps a buffer of its own from
// cudaMallocAsync for the process's life (it grows only outside a capture; a larger need during a
// capture is met by cudaMallocAsync, which the graph records as an allocation), and every such
// allocation is counted (ops::unbound_allocations). Devices without memory pools fall back to
// cudaMalloc / cudaFree (which synchronise).
class stream_scratch {
 public:
  stream_scratch(std::size_t bytes, stream_handle s) : stream_(as_cuda(s)) {
    if (bytes == 0) return;
    if (const auto bound = workspace::find(s)) {
      if (bytes > bound->scratch_bytes) {
        throw invalid_state("ops scratch: " + std::to_string(bytes) + " bytes needed but the workspace bound to stream " +
                            format_pointer(s) + " has " + std::to_string(bound->scratch_bytes) +
                            " (ops.workspaceBytes says how much to bind)");
      }
      ptr_ = bound->scratch;
      return;
    }
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    detail::check_cuda(cudaStreamIsCapturing(stream_, &capture), "cudaStreamIsCapturing");
    {
      cache& c = shared();
      std::lock_guard<std::mutex> lock(c.mutex);
      buffer& b = c.buffers[stream_];
      if (b.bytes >= bytes) {
        ptr_ = b.ptr;
        return;
      }
      if (capture == cudaStreamCaptureStatusNone) {
        void* grown = nullptr;
        if (cudaMallocAsync(&grown, bytes, stream_) == cudaSuccess) {
          workspace::count_unbound_allocation();
          if (b.ptr != nullptr) cudaFreeAsync(b.ptr, stream_);  // after the work already queued on it
          b = {grown, bytes};
          ptr_ = grown;
          return;
        }
        cudaGetLastError();
      }
    }
    owned_ = true;
    workspace::count_unbound_allocation();
    const cudaError_t status = cudaMallocAsync(&ptr_, bytes, stream_);
    if (status == cudaErrorNotSupported) {  // no memory pools on this device: plain cudaMalloc
      cudaGetLastError();
      ptr_ = nullptr;
      async_ = false;
      detail::check_cuda(cudaMalloc(&ptr_, bytes), "cudaMalloc (ops scratch)");
      return;
    }
    detail::check_cuda(status, "cudaMallocAsync (ops scratch)");
  }
  ~stream_scratch() {
    if (ptr_ == nullptr || !owned_) return;
    if (async_) {
      cudaFreeAsync(ptr_, stream_);
    } else {  // cudaFree would not wait for the stream's work on a non-blocking stream
      cudaStreamSynchronize(stream_);
      cudaFree(ptr_);
    }
  }
  stream_scratch(const stream_scratch&) = delete;
  stream_scratch& operator=(const stream_scratch&) = delete;
  template <class T>
  T* as(std::size_t byte_offset = 0) const {
    return reinterpret_cast<T*>(static_cast<char*>(ptr_) + byte_offset);
  }

 private:
  struct buffer {
    void* ptr = nullptr;
    std::size_t bytes = 0;
  };
  struct cache {
    std::mutex mutex;
    std::unordered_map<cudaStream_t, buffer> buffers;  // kept for the process's life
  };
  static cache& shared() {
    static cache c;
    return c;
  }

  cudaStream_t stream_;
  void* ptr_ = nullptr;
  bool owned_ = false;  // a one-off allocation of this call, not the stream's buffer
  bool async_ = true;
};

}  // namespace gpumem::ops::gpu
