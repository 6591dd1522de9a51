// Physical memory behind a virtual address range, in runs of whole granules: what
// expandable_resource grows and shrinks its per-stream ranges with. Two implementations make the same allocator logic run on a
// GPU and on any machine:
//   device     CUDA's virtual memory management (cuMemAddressReserve, one cuMemCreate + cuMemMap +
//              cuMemSetAccess per run, cuMemUnmap + cuMemRelease, cuMemAddressFree), driver
//              entry points looked up once through the runtime, so that the addon still loads
//              where there is no driver;
//   host twin  an mmap(PROT_NONE) reservation whose runs are committed with one
//              mprotect(PROT_READ | PROT_WRITE) and given back with madvise(MADV_DONTNEED) +
//              mprotect(PROT_NONE).
// A run is mapped with one sequence of calls, so growing by k granules costs one sequence, not k.
// Two decorators put the common layers where a run mapper can have them: a byte budget checked on
// every run mapped (limitBytes: what a smaller GPU would do) and fault injection (faultInjection:
// every Nth run map fails, or any that would pass a budget); a failed run maps nothing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpumem/fault_injecting_adaptor.hpp"
#include "gpumem/stream.hpp"

namespace gpumem {

class physical_memory {
 public:
  physical_memory() = default;
  virtual ~physical_memory() = default;
  physical_memory(const physical_memory&) = delete;
  physical_memory& operator=(const physical_memory&) = delete;

  // Every mapping is of whole granules of this many bytes, at an address that is a multiple of it.
  virtual std::size_t granule_bytes() const noexcept = 0;
  // A virtual range of `bytes` (a multiple of the granule), aligned to the granule, with nothing
  // mapped. Throws out_of_memory when no such range can be reserved.
  virtual void* reserve_range(std::size_t bytes) = 0;
  // Frees a range from reserve_range whose granules are all unmapped. Never throws.
  virtual void release_range(void* base, std::size_t bytes) noexcept = 0;
  // Backs the run of `bytes` (a positive multiple of the granule) at `addr` (granule-aligned, all
  // unmapped) with memory that the device (or the host) can read and write, as one physical
  // allocation. Throws out_of_memory when there is none to be had; maps nothing then.
  virtual void map_run(void* addr, std::size_t bytes) = 0;
  // Gives back a run exactly as map_run mapped it (the device's allocation cannot be split). The
  // caller has made sure no work still uses it. Never throws.
  virtual void unmap_run(void* addr, std::size_t bytes) noexcept = 0;
  // Waits for all work on the device (nothing on the host): the last resort before unmapping when
  // the streams that used the memory are not known (the owner's destructor). Never throws.
  virtual void synchronize() noexcept {}
  // The device's memory (0 where unknown, as on the host): the default virtual range per stream and
  // the capacity gcThreshold is a fraction of.
  virtual std::uint64_t total_bytes() const noexcept = 0;
  virtual memory_kind kind() const noexcept = 0;
  virtual int device() const noexcept = 0;  // -1 for host memory
};

// The host twin. granule_bytes: a power of two >= the page size; 0 for the default, 2 MiB.
// Throws invalid_argument (granuleBytes) for anything else.
std::unique_ptr<physical_memory> make_host_physical_memory(std::size_t granule_bytes = 0);

// CUDA VMM on `device`. granule_bytes: a multiple of the device's minimum granularity; 0 for the
// recommended granularity. `peers` (checked by the caller: gpumem/peer_access.hpp) are devices
// every run is mapped read/write for besides `device` (cuMemSetAccess). Throws invalid_state where
// the build has no CUDA, there is no driver or the device lacks virtual memory management,
// invalid_argument (granuleBytes) for a bad granule.
std::unique_ptr<physical_memory> make_device_physical_memory(int device, std::size_t granule_bytes = 0,
                                                             const std::vector<int>& peers = {});

// Fails a map_run that would take the bytes mapped through it past `limit_bytes`.
std::unique_ptr<physical_memory> make_limited_physical_memory(std::unique_ptr<physical_memory> inner,
                                                              std::uint64_t limit_bytes);

// Fails map_run on purpose as fault_injecting_adaptor fails allocate: every fail_every-th run
// attempt, and any that would take the bytes mapped through it past fail_after_bytes.
std::unique_ptr<physical_memory> make_fault_injecting_physical_memory(std::unique_ptr<physical_memory> inner,
                                                                      fault_options options);

}  // namespace gpumem
