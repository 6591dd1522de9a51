// cudaMallocAsync on a cudaMemPool_t this resource creates and owns. The release threshold says
// how much freed memory the pool keeps at a synchronisation point (default: all of it). Reserved
// bytes and their high-water mark are read from the pool's attributes.
#pragma once
#include <cstdint>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "gpumem/detail/allocation_table.hpp"
#include "gpumem/memory_resource.hpp"

namespace gpumem {

// Also strategy 'async''s options in a chain_spec (spec.options<async_spec>()), where the chain
// builder sets peer_access from chain_spec::peer_access.
struct async_spec {
  std::uint64_t release_threshold = std::numeric_limits<std::uint64_t>::max();
  // Devices that may read and write the pool's memory (cudaMemPoolSetAccess, read/write), set when
  // the pool is made: the peerAccess option.
  std::vector<int> peer_access;
};

class async_resource final : public detail::leaf_resource {
 public:
  explicit async_resource(int device = 0, async_spec options = {});
  ~async_resource() override;
  std::uint64_t release_threshold() const noexcept { return options_.release_threshold; }
  void* pool_handle() const noexcept { return pool_; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) override;
  void do_record_stream(void* ptr, stream_handle stream) override;
  resource_stats do_stats() const override;
  void do_reset_peak() override;
  void do_trim(std::size_t bytes_to_keep) override;
  memory_kind do_kind() const noexcept override { return memory_kind::device; }
  int do_device() const noexcept override { return device_; }

  int device_;
  async_spec options_;
  void* pool_ = nullptr;  // cudaMemPool_t
  std::mutex recorded_mutex_;
  std::unordered_map<void*, std::vector<stream_handle>> recorded_streams_;
};

}  // namespace gpumem
