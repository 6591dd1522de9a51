// The 'tiered' strategy: device memory first, then pinned host memory that kernels read and write
// in place (zero-copy over the interconnect), so that a model larger than the GPU still trains.
// Never managed memory: nothing migrates by page faults; a block is on one tier until prefetch()
// moves it, and it keeps its address when it moves.
//
//  - every block has a virtual range of its own, its size rounded up to the granule (2 MiB), backed
//    by one physical allocation on one tier (vmm.hpp: CUDA VMM, or the memfd host twin);
//  - placement (set_placement): automatic puts a block on the device while the device tier's bytes
//    (live and cached) stay within device_budget_bytes and the driver gives memory, and on the host
//    (a spill) otherwise, within host_budget_bytes; device means the device only and host the host
//    only (out_of_memory rather than the other tier). The trainer sets it from its allocation tags;
//  - freed blocks are cached per (tier, rounded size) and reused by requests of that size on that
//    tier, in stream order: a block freed on stream A at once on A, on another stream B after B waits
//    on an event recorded on A (and on the streams record_stream named); nothing on the host twin.
//    Where a new block would need cached blocks released to fit the budget, a cached block of the
//    tier up to 4x the size serves the request instead. In steady state (the same sizes each epoch) malloc and free make no driver call. When a
//    budget or the driver refuses, cached blocks of that tier are released (oldest first, as many as
//    the budget needs; all of them when the driver refuses) and the request retried once, so the
//    cache never causes an out_of_memory; trim(bytes_to_keep) releases cached blocks, oldest first,
//    until at most bytes_to_keep are reserved (trim() every one); live blocks are never touched;
//  - prefetch(ptr, bytes, to, stream) moves the blocks of [ptr, ptr + bytes) to `to`'s tier: new
//    physical memory there, mapped at a temporary range, the block copied on `stream` (after `stream`
//    waits on the streams the block was used on), the stream synchronised, the old memory unmapped
//    and released, the new mapped at the block's address. It returns false and changes nothing when
//    the tier has no room for them all; true once every block is there;
//  - stats: allocated = bytes asked for and reserved = physical bytes held (live and cached), both
//    tiers together; host_allocated_bytes / host_reserved_bytes (and peaks) the host part;
//    upstream alloc/free counts and segment_count count physical allocations (migrations included);
//    largest_free_block is the largest cached block; bytes_moved_to_host / _to_device the bytes
//    prefetch copied (the blocks' requested sizes);
//  - sleep and wake by tag (gpumem/sleep.hpp; registry flag `sleep`): every block records the tag
//    current at its allocation. sleep(tags) waits for the device, copies the live bytes of the
//    device-tier blocks of the tags that keep to host memory, and unmaps and releases their physical
//    memory, keeping each block's virtual range; the device tier's reserved bytes (and so its budget)
//    drop by them, so that other tags may use that room while they sleep. Cached blocks keep the tag
//    of their last owner and any tag may reuse them (the steady state is unchanged); sleeping a tag
//    releases its cached device-tier blocks, so that sleeping every tag leaves the device tier holding
//    nothing. Host-tier blocks already live off the device: sleep leaves them mapped, their content
//    in place. wake(tags) creates device memory for each sleeping block within device_budget_bytes
//    (out_of_memory, the tags still asleep, when the budget or the driver has no room) and maps it at
//    the block's address, then copies the kept content back. While a tag sleeps a free of its block
//    is fine (the saved copy is dropped), an allocation in it and a prefetch of its blocks throw
//    invalid_state naming the tag, and trim and the budget's releases leave its blocks alone;
//  - thread-safe (one lock; a migration, a sleep and a wake hold it while they copy).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "gpumem/memory_resource.hpp"
#include "gpumem/sleep.hpp"
#include "gpumem/stream_ordering.hpp"
#include "gpumem/placeable.hpp"
#include "gpumem/vmm.hpp"

namespace gpumem {


struct tiered_options {
  // Bytes the device tier may hold (live and cached blocks). Default: the device's free memory when
  // the resource is made, less 1 GiB for the CUDA context and libraries (the host twin: 1 GiB). 0:
  // everything on the host.
  std::optional<std::uint64_t> device_budget_bytes;
  // Bytes the host tier may hold pinned. Never more than MemAvailable less 10% of MemTotal when the
  // resource is made (the 'pinned' strategy's cap): an explicit value only lowers it.
  std::optional<std::uint64_t> host_budget_bytes;
  placement_choice placement = placement_choice::automatic;
  // Host bytes the backups of sleeping tags (and the pool kept for the next sleep) may hold.
  // Default: the host's available memory less 10% of its total, read at each sleep.
  std::optional<std::uint64_t> backup_limit_bytes;
  // Host bytes pinned for the backups ahead of the first sleep, on background threads started when
  // the resource is made (sleepable::reserve_backup); 0: none, the first sleep pins as it copies.
  std::uint64_t backup_reserve_bytes = 0;
};

class tiered_resource final : public memory_resource, public sleepable, public placeable {
 public:
  // Owns `memory`. `ordering` defaults to the one matching its kind (CUDA events on a GPU, nothing on
  // the host twin). Throws invalid_state where no host budget can be decided (no /proc/meminfo and
  // no host_budget_bytes).
  explicit tiered_resource(std::unique_ptr<vmm> memory, tiered_options options = {},
                           std::unique_ptr<stream_ordering> ordering = nullptr);
  // Unmaps and releases every block, live or cached (a sleeping one has nothing mapped), and frees
  // the backups of sleeping tags.
  ~tiered_resource() override;

  // placeable: where allocations go from now on; the placement made with (tiered_options::placement).
  void set_placement(placement_choice choice) noexcept override;
  placement_choice current_placement() const noexcept override;
  placement_choice configured_placement() const noexcept override;

  std::uint64_t device_budget_bytes() const noexcept;  // resolved
  std::uint64_t host_budget_bytes() const noexcept;    // resolved
  std::size_t granule_bytes() const noexcept;
  // The tier of the live block that contains `ptr`; nullopt when none does.
  std::optional<placement> tier_of(const void* ptr) const;
  // Cached (freed, not yet released) blocks and their bytes, over both tiers.
  std::size_t cached_blocks() const;
  std::uint64_t cached_bytes() const;

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) override;
  void do_record_stream(void* ptr, stream_handle stream) override;
  bool do_prefetch(void* ptr, std::size_t bytes, placement to, stream_handle stream) override;
  resource_stats do_stats() const override;
  void do_reset_peak() override;
  void do_trim(std::size_t bytes_to_keep) override;
  std::size_t do_allocation_size(const void* ptr) const override;
  memory_kind do_kind() const noexcept override;
  int do_device() const noexcept override;

  sleep_report do_sleep(const sleep_request& request) override;
  sleep_report do_wake(const wake_request& request) override;
  std::vector<tag_state> do_tag_states() const override;
  std::uint64_t do_backup_pool_bytes() const override;
  bool do_read_backup(const void* addr, std::size_t bytes, void* out) const override;
  const void* do_backup_view(const void* addr, std::size_t bytes) const override;
  void do_trim_backup() override;
  void do_reserve_backup(std::uint64_t bytes) override;
  void do_check_awake(const void* ptr, std::size_t bytes) const override;

  struct impl;
  std::unique_ptr<impl> impl_;
};

// Where a 'tiered' strategy's tiers come from: CUDA VMM on `device` (device memory, then pinned host
// memory kernels use in place), the host twin (memfd mappings), or automatic (CUDA VMM when a GPU is
// present; the option values "cuda", "host", "auto"). Its leaf is a tiered_resource; fault, limit and
// tracking wrap it as memory_resources ({"tiered", "fault", "limit", "track"}), so limitBytes caps the
// bytes callers hold over both tiers.
// Strategy 'tiered' (its options in a chain_spec: spec.options<tiered_spec>()).
struct tiered_spec {
  placement_choice backing = placement_choice::automatic;
  tiered_options options;
};

}  // namespace gpumem
