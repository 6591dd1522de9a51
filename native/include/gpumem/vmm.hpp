// Virtual memory management: the one primitive under every strategy that maps physical memory into
// address ranges it reserved ('expandable' and 'caching' grow and shrink per-stream ranges with it,
// 'tiered' moves a block between tiers at one address, and their sleeps give memory back and map it
// again at the same addresses). Reserve a range, create a physical allocation (on the device or in
// host memory), map it at an address of a range, unmap it, release it. Two implementations run the
// same allocator logic on a GPU and on any machine (the host one is what a strategy's host twin,
// its 'host' placement, runs on):
//   device     CUDA's virtual memory management: cuMemAddressReserve, cuMemCreate on the device
//              (CU_MEM_LOCATION_TYPE_DEVICE) or in host memory (CU_MEM_LOCATION_TYPE_HOST_NUMA, the
//              device's nearest NUMA node), cuMemMap + cuMemSetAccess (read/write for the device and
//              its peers, and for the host too where the memory is on the host), cuMemUnmap,
//              cuMemRelease, cuMemAddressFree; driver entry points looked up at run time
//              (resources/cuda_driver.hpp), so the addon loads where there is no driver;
//   host       both tiers are host memory: a physical allocation is a memfd (memfd_create +
//              ftruncate), mapped at a fixed address inside an mmap(PROT_NONE) reservation with
//              mmap(MAP_FIXED | MAP_SHARED), so that mapping one allocation at another address (a
//              move between tiers) works exactly as on a GPU. Runs anywhere; CI tests with it.
// Two decorators put the common layers where a mapping strategy can have them: a byte budget on the
// physical allocations created (limitBytes: what a smaller GPU would do) and fault injection
// (faultInjection); a failed create creates nothing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpumem/fault_injecting_adaptor.hpp"
#include "gpumem/placement.hpp"
#include "gpumem/stream.hpp"

namespace gpumem {


class vmm {
 public:
  // A physical allocation (a CUmemGenericAllocationHandle, or the host implementation's file descriptor).
  using handle = std::uint64_t;

  vmm() = default;
  virtual ~vmm() = default;
  vmm(const vmm&) = delete;
  vmm& operator=(const vmm&) = delete;

  // Every size and address below is a multiple of this.
  virtual std::size_t granule_bytes() const noexcept = 0;

  // A virtual range of `bytes` (a positive multiple of the granule), granule-aligned, nothing
  // mapped. Throws out_of_memory when there is no such range.
  virtual void* reserve(std::size_t bytes) = 0;
  // Frees a range from reserve() with nothing mapped in it. Never throws.
  virtual void free_range(void* base, std::size_t bytes) noexcept = 0;

  // A physical allocation of `bytes` (a positive multiple of the granule) in `tier`. Throws
  // out_of_memory when the tier has none to give, creating nothing; other failures as cuda_error.
  virtual handle create(std::size_t bytes, placement tier) = 0;
  // Gives a physical allocation back; it must not be mapped anywhere. Never throws.
  virtual void release(handle h) noexcept = 0;

  // Maps all of `h` (created with `bytes` in `tier`) at `addr` (granule-aligned, unmapped, inside a
  // reserved range), readable and writable by the device and its peers and, where the tier is the
  // host, by the host too. Throws out_of_memory or cuda_error, mapping nothing then.
  virtual void map(void* addr, std::size_t bytes, handle h, placement tier) = 0;
  // Unmaps what map() mapped at `addr` (the range stays reserved). The caller has made sure no work
  // still uses it. Never throws.
  virtual void unmap(void* addr, std::size_t bytes) noexcept = 0;

  // Copies `bytes` from `src` to `dst` (both mapped by map()) in order on `stream`; complete once
  // synchronize(stream) returns.
  virtual void copy(void* dst, const void* src, std::size_t bytes, stream_handle stream) = 0;
  // Waits on the host for the work queued on `stream` (on the host, the host stream's work).
  virtual void synchronize(stream_handle stream) = 0;
  // Waits for all work on the device (on the host, every host stream's): the last resort before
  // unmapping memory when the streams that used it are not known. Never throws.
  virtual void synchronize_device() noexcept {}

  // The device's memory (0 where unknown, as on the host): the default virtual range per stream and
  // the capacity gcThreshold is a fraction of.
  virtual std::uint64_t total_bytes() const noexcept = 0;
  // The device budget when none is given: the device's free memory now less headroom for the CUDA
  // context and libraries (on the host: 1 GiB).
  virtual std::uint64_t default_device_budget() const = 0;
  // memory_kind::device for CUDA (copies through cudaMemcpy, reuse across streams through CUDA
  // events), memory_kind::host for the host implementation.
  virtual memory_kind kind() const noexcept = 0;
  virtual int device() const noexcept = 0;  // -1 for the host implementation
};

// The host implementation. granule_bytes: a power of two >= the page size; 0 for the default, 2 MiB. Throws
// invalid_argument (granuleBytes) for anything else.
std::unique_ptr<vmm> make_host_vmm(std::size_t granule_bytes = 0);

struct vmm_options {
  // Opens every error message ("expandable: ..."): the strategy that asked for the memory.
  std::string owner = "expandable";
  // How the strategy's user picks the host twin instead, for the message of a build without CUDA.
  std::string host_twin_hint = "device 'host'";
  // A multiple of the device's minimum granularity; 0 for the recommended granularity (with
  // host_tier, of both tiers: their least common multiple).
  std::size_t granule_bytes = 0;
  // Devices (checked by the caller: gpumem/peer_access.hpp) every mapping, on either tier, is made
  // read/write for besides the device (cuMemSetAccess).
  std::vector<int> peers;
  // Whether create() is asked for host memory (placement::host): the device must then support
  // host-located VMM allocations.
  bool host_tier = false;
};

// CUDA VMM on `device`. Throws invalid_state where the build has no CUDA, there is no driver, or the
// device lacks virtual memory management (or, with host_tier, host-located VMM allocations: the
// message names the attribute); invalid_argument (granuleBytes) for a bad granule.
std::unique_ptr<vmm> make_device_vmm(int device, const vmm_options& options = {});

// Fails a create that would take the bytes created through it, and not released, past `limit_bytes`.
std::unique_ptr<vmm> make_limited_vmm(std::unique_ptr<vmm> inner, std::uint64_t limit_bytes);

// Fails create on purpose as fault_injecting_adaptor fails allocate: every fail_every-th attempt,
// and any that would take the bytes created through it, and not released, past fail_after_bytes.
std::unique_ptr<vmm> make_fault_injecting_vmm(std::unique_ptr<vmm> inner, fault_options options);

}  // namespace gpumem
