// Expandable segments: per stream one virtual address range, backed by physical memory in granules
// that are mapped as the memory in use grows and unmapped when asked (PyTorch's
// expandable_segments:True). Blocks in a range never need to fit a segment, so changing shapes do not
// strand memory the way fixed segments do: a free block may span mapped and unmapped granules, and
// allocating it maps only the granules it needs that are not mapped yet, each stretch of consecutive
// ones as one run (one cuMemCreate + cuMemMap + cuMemSetAccess, or one mprotect, per run).
//
//  - sizes are rounded up to 512 bytes; best fit over each stream's free blocks (the pool's
//    segregated-fit index), the rest of a block split off, freed blocks coalesced with free
//    neighbours;
//  - the range of stream S serves allocations on S only. A block freed on another stream T joins
//    S's free blocks remembering T, and S waits on an event recorded on T before reusing it;
//    record_stream(p, s) parks a freed block until events recorded on s have completed (as the pool);
//  - granules in use (touched by a live or parked block) stay mapped; idle ones (mapped, touched by
//    none) are unmapped by trim(bytes_to_keep), once they pass release_threshold, before growth
//    past gc_threshold x capacity, before reserved passes its peak (unmap_idle_before_growth), and
//    when mapping fails: then every stream's idle runs are
//    unmapped and the map retried once. A run is unmapped whole, so only runs whose granules are
//    all idle go; an idle granule in a run still in use stays mapped until the whole run is idle. Before unmapping, the streams that used the memory are
//    synchronised (an event recorded on each, waited for on the host);
//  - a destroyed stream's range (stream_observer) serves no new allocation; it goes when its last
//    block is freed;
//  - a malloc+free of a cached block costs the same whatever its size: the granule bookkeeping is
//    per mapped run (each granule names its run; only a block's first and last granule keep counts),
//    and the block freed last may stay unmerged until a call needs the merged blocks (every decision
//    is the one the merged blocks give);
//  - stats: allocated = bytes asked for; reserved = bytes mapped; upstream alloc/free counts and
//    segment_count are runs mapped, runs unmapped and runs mapped now (driver call sequences); largest_free_block is the largest
//    free run of mapped memory (what one allocation can take with no driver call);
//  - sleep and wake by tag (gpumem/sleep.hpp; registry flag `sleep`): a range belongs to a stream
//    and a tag (the one current at the allocation), so that blocks of two tags never share a mapped
//    run. sleep(tags) waits for the device, copies the live blocks of the tags that keep to host
//    memory, unmaps their idle runs for good and their runs in use keeping the addresses (reserved
//    drops by both); wake(tags) maps the runs in use again at the same addresses and copies the
//    content back. While a tag sleeps its ranges are left alone by trim and the release policies, a
//    free in it drops the block's saved copy (a run it leaves idle is forgotten, not mapped at wake),
//    and an allocation in it throws invalid_state;
//  - thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "gpumem/memory_resource.hpp"
#include "gpumem/vmm.hpp"
#include "gpumem/sleep.hpp"
#include "gpumem/stream_ordering.hpp"

namespace gpumem {

struct expandable_options {
  // Idle mapped bytes kept (summed over every stream); past it, idle granules are unmapped at free.
  // Default: keep everything, as cudaMallocAsync's default release threshold.
  std::uint64_t release_threshold = std::numeric_limits<std::uint64_t>::max();
  // 0: off. Else 0 < f <= 1: before mapping past f x capacity_bytes, idle granules are unmapped first
  // (PyTorch's garbage_collection_threshold).
  double gc_threshold = 0;
  // Before mapping past the peak of reserved bytes (since reset_peak), idle granules (every
  // stream's) are unmapped first, so that a request that fits no free block reuses the physical
  // memory of the holes it does not fit instead of holding it beside new granules. Costs a host
  // synchronisation of the streams that used them, only when reserved would pass its peak. false
  // (the default): idle granules stay mapped until trim, release_threshold or gc_threshold. It
  // suits one stream whose shapes vary, not streams taking turns: on an H100, two streams unmapped
  // 214 runs a pass, 55.7 us an allocation against 4.4 us (bench/RESULTS.md).
  bool unmap_idle_before_growth = false;
  // What gc_threshold is a fraction of; 0: the device's total memory (the host twin: reserve_bytes).
  std::uint64_t capacity_bytes = 0;
  // The virtual range reserved per stream, a multiple of the granule; 0: the device's total memory
  // rounded up to a granule (the host twin: 64 GiB). No single allocation can be larger.
  std::uint64_t reserve_bytes = 0;
  // Host bytes the backups of sleeping tags (and the pool kept for the next sleep) may hold;
  // nullopt: MemAvailable less 10% of MemTotal, read at each sleep.
  std::optional<std::uint64_t> backup_limit_bytes;
  // Host bytes pinned for the backups ahead of the first sleep, on background threads started when
  // the resource is made (sleepable::reserve_backup); 0: none, the first sleep pins as it copies.
  std::uint64_t backup_reserve_bytes = 0;
};

class expandable_resource final : public memory_resource, public sleepable {
 public:
  static constexpr std::size_t rounding = 512;
  static constexpr std::uint64_t default_host_reserve = std::uint64_t{64} << 30;
  // A range has at most this many granules (8 bytes of records each).
  static constexpr std::uint64_t max_granules_per_range = std::uint64_t{1} << 24;

  // Owns `memory`. `ordering` defaults to the one matching its kind (CUDA events for device memory,
  // nothing for host memory). Throws invalid_argument naming the option for bad options.
  explicit expandable_resource(std::unique_ptr<vmm> memory, expandable_options options = {},
                               std::unique_ptr<stream_ordering> ordering = nullptr);
  ~expandable_resource() override;  // unmaps every run (but sleeping ones) and frees every range

  const expandable_options& options() const noexcept;  // with the defaults resolved
  std::size_t granule_bytes() const noexcept;
  // Mapped granules no live or parked block touches, in bytes (summed over every stream).
  std::uint64_t idle_bytes() const;
  // Virtual ranges held (one per stream and tag that allocated, until its stream is destroyed and emptied).
  std::size_t range_count() const;
  // Blocks parked after free() that wait on events from record_stream.
  std::size_t pending_free_blocks() const;

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

// Strategy 'expandable' (its options in a chain_spec: spec.options<expandable_spec>()).
struct expandable_spec {
  placement backing = placement::device;  // where the granules come from: CUDA VMM, or the host twin (also device -1)
  std::uint64_t granule_bytes = 0;  // 0: the backing's default
  expandable_options options;       // capacity_bytes 0: limitBytes when set, else the device's memory
};

}  // namespace gpumem
