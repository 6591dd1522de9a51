// Runs of granules over the VMM primitive (gpumem/vmm.hpp): what 'expandable' and 'caching' grow and
// shrink their per-stream ranges with. A run is one physical allocation on the device tier, created
// and mapped in one step and unmapped and released in one, so that growing by k granules costs one
// create and one map, not k; its handle is kept by the run's address, since a physical allocation is
// unmapped whole. Not thread-safe: the owning resource calls it under its lock. Internal to
// gpumem_core.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "gpumem/vmm.hpp"

namespace gpumem::detail {

class vmm_runs {
 public:
  explicit vmm_runs(std::unique_ptr<vmm> memory) : memory_(std::move(memory)) {}
  ~vmm_runs();  // the owner unmaps every run before it goes; anything left is released here, quietly
  vmm_runs(const vmm_runs&) = delete;
  vmm_runs& operator=(const vmm_runs&) = delete;

  // Every run is of whole granules of this many bytes, at an address that is a multiple of it.
  std::size_t granule_bytes() const noexcept { return memory_->granule_bytes(); }
  // A range of `bytes` (a multiple of the granule), nothing mapped; throws out_of_memory.
  void* reserve_range(std::size_t bytes) { return memory_->reserve(bytes); }
  // Frees a range from reserve_range whose runs are all unmapped. Never throws.
  void release_range(void* base, std::size_t bytes) noexcept { memory_->free_range(base, bytes); }
  // Backs the run of `bytes` (a positive multiple of the granule) at `addr` (granule-aligned, all
  // unmapped) with one physical allocation on the device. Throws out_of_memory when there is none
  // to be had (or the driver's error); maps and keeps nothing then.
  void map_run(void* addr, std::size_t bytes);
  // Gives back a run exactly as map_run mapped it. The caller has made sure no work still uses it.
  // Never throws.
  void unmap_run(void* addr, std::size_t bytes) noexcept;
  // Waits for all work on the device (on the host, every host stream's): the last resort before
  // unmapping when the streams that used the memory are not known. Never throws.
  void synchronize() noexcept { memory_->synchronize_device(); }

  std::uint64_t total_bytes() const noexcept { return memory_->total_bytes(); }
  memory_kind kind() const noexcept { return memory_->kind(); }
  int device() const noexcept { return memory_->device(); }

 private:
  struct mapped_run {
    vmm::handle handle;
    std::size_t bytes;
  };
  std::unique_ptr<vmm> memory_;
  std::unordered_map<std::uintptr_t, mapped_run> runs_;  // by start address
};

}  // namespace gpumem::detail
