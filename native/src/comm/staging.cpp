#include "staging.hpp"

#include <cstring>

#include "core/cuda_runtime_check.hpp"
#include "gpumem/errors.hpp"

namespace gpumem::comm {

void stage_copy(float* dst, const float* src, std::uint64_t count, int device, stream_handle stream) {
  if (device < 0) {
    std::memcpy(dst, src, count * sizeof(float));
    return;
  }
#ifdef GPUMEM_WITH_CUDA
  detail::device_scope scope(device);
  auto s = static_cast<cudaStream_t>(stream);
  detail::check_cuda(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDefault, s), "cudaMemcpyAsync");
  detail::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
#else
  (void)stream;
  throw invalid_state("buffers on a CUDA device need a build of gpumem with CUDA support");
#endif
}

}  // namespace gpumem::comm
