// cudaMalloc / cudaFree: the baseline. Every call goes to the driver; cudaFree synchronises the
// device, so memory is never reused while a stream still uses it (record_stream has nothing to do).
// `peers` (the peerAccess option): devices whose contexts get peer access to `device` when the
// resource is made (cudaDeviceEnablePeerAccess), so that they read and write its memory directly.
#pragma once
#include <vector>

#include "gpumem/detail/allocation_table.hpp"
#include "gpumem/memory_resource.hpp"

namespace gpumem {

class cuda_resource final : public detail::leaf_resource {
 public:
  // Throws invalid_state without CUDA, cuda_error for a bad device or a peer the driver refuses.
  explicit cuda_resource(int device = 0, const std::vector<int>& peers = {});
  ~cuda_resource() override;

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) override;
  memory_kind do_kind() const noexcept override { return memory_kind::device; }
  int do_device() const noexcept override { return device_; }

  int device_;
};

}  // namespace gpumem
