// The physical side of the 'tiered' strategy: memory in one of two tiers (the device, or pinned host
// memory that kernels read and write in place) created as whole physical allocations and mapped at
// virtual addresses the caller reserved, so that a block can change tiers and keep its address.
// Two implementations run the same tiered_resource logic:
//   device     CUDA's virtual memory management: cuMemAddressReserve, cuMemCreate on the device
//              (CU_MEM_LOCATION_TYPE_DEVICE) or in host memory (CU_MEM_LOCATION_TYPE_HOST_NUMA, the
//              device's nearest NUMA node), cuMemMap + cuMemSetAccess (read/write for the device, and
//              for the host too where the memory is on the host), cuMemUnmap, cuMemRelease; driver
//              entry points looked up at run time, so the addon loads where there is no driver;
//   host twin  both tiers are host memory: a physical allocation is a memfd (memfd_create +
//              ftruncate), mapped at a fixed address inside an mmap(PROT_NONE) reservation with
//              mmap(MAP_FIXED | MAP_SHARED), so that mapping the same allocation at another address
//              (a move between tiers) works exactly as on a GPU. Runs anywhere; CI tests with it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpumem/stream.hpp"

namespace gpumem {

// Where a block's memory lives.
enum class memory_tier : std::uint8_t { device = 0, host = 1 };

const char* tier_name(memory_tier tier) noexcept;  // "device", "host"

class tier_memory {
 public:
  // A physical allocation (a CUmemGenericAllocationHandle, or the twin's file descriptor).
  using handle = std::uint64_t;

  tier_memory() = default;
  virtual ~tier_memory() = default;
  tier_memory(const tier_memory&) = delete;
  tier_memory& operator=(const tier_memory&) = delete;

  // Every size and address below is a multiple of this.
  virtual std::size_t granule_bytes() const noexcept = 0;

  // A virtual range of `bytes` (a positive multiple of the granule), granule-aligned, nothing
  // mapped. Throws out_of_memory when there is no such range.
  virtual void* reserve(std::size_t bytes) = 0;
  // Frees a range from reserve() with nothing mapped in it. Never throws.
  virtual void free_range(void* base, std::size_t bytes) noexcept = 0;

  // A physical allocation of `bytes` (a positive multiple of the granule) in `tier`. Throws
  // out_of_memory when the tier has none to give; other failures as cuda_error.
  virtual handle create(std::size_t bytes, memory_tier tier) = 0;
  // Gives a physical allocation back; it must not be mapped anywhere. Never throws.
  virtual void release(handle h) noexcept = 0;

  // Maps all of `h` (created with `bytes` in `tier`) at `addr` (granule-aligned, unmapped, inside a
  // reserved range), readable and writable by the device and, where the tier is the host, by the
  // host too. Throws out_of_memory or cuda_error, mapping nothing then.
  virtual void map(void* addr, std::size_t bytes, handle h, memory_tier tier) = 0;
  // Unmaps what map() mapped at `addr` (the range stays reserved). The caller has made sure no work
  // still uses it. Never throws.
  virtual void unmap(void* addr, std::size_t bytes) noexcept = 0;

  // Copies `bytes` from `src` to `dst` (both mapped by map()) in order on `stream`; complete once
  // synchronize(stream) returns.
  virtual void copy(void* dst, const void* src, std::size_t bytes, stream_handle stream) = 0;
  // Waits on the host for the work queued on `stream` (nothing on the twin).
  virtual void synchronize(stream_handle stream) = 0;
  // Waits for all work on the device (nothing on the twin): the last resort before unmapping memory
  // when the streams that used it are not known. Never throws.
  virtual void synchronize_device() noexcept {}

  // The device budget when none is given: the device's free memory now less headroom for the
  // CUDA context and libraries (the twin: 1 GiB).
  virtual std::uint64_t default_device_budget() const = 0;
  // memory_kind::device for CUDA (copies go through cudaMemcpy, reuse across streams through CUDA
  // events), memory_kind::host for the twin.
  virtual memory_kind kind() const noexcept = 0;
  virtual int device() const noexcept = 0;  // -1 for the twin
};

// The host twin. granule_bytes: a power of two >= the page size; 0 for the default, 2 MiB. Throws
// invalid_argument (granuleBytes) for anything else.
std::unique_ptr<tier_memory> make_host_tier_memory(std::size_t granule_bytes = 0);

// CUDA VMM on `device`, device memory plus host memory of the device's nearest NUMA node. `peers`
// (checked by the caller: gpumem/peer_access.hpp) are devices every mapping, on either tier, is
// made read/write for besides `device`. Throws invalid_state where the build has no CUDA, there is
// no driver, or the device lacks virtual memory management or host-located VMM allocations (the
// message names the attribute).
std::unique_ptr<tier_memory> make_device_tier_memory(int device, const std::vector<int>& peers = {});

}  // namespace gpumem
