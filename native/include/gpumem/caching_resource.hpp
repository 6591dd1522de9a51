// A twin of PyTorch's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp and the settings of
// c10/core/AllocatorConfig.cpp, read at pytorch/pytorch main of 2026-11, the rules of PyTorch 2.11):
// the same decisions, made in the same order, so that a replay of a recorded program reserves what
// PyTorch reserved, and a replay under a capacity fails where PyTorch's would.
//
//  - round_size: requests under 512 B take 512 B; others are rounded up to 512 B, or, where
//    roundup_power2_divisions gives the request's power-of-two interval N > 1 divisions (and the
//    request is over 512 B * N), to the next of N equal steps between two powers of two;
//  - pools: rounded sizes up to 1 MiB are small (segments of 2 MiB), larger ones large (segments of
//    20 MiB under 10 MiB, else the size rounded up to 2 MiB): get_allocation_size;
//  - best fit per stream: free blocks are ordered by (stream, size, address) and the first at or
//    above the request on the request's stream is taken; a block of max_split_size or more is not
//    given to a smaller request, nor to a larger one that it exceeds by max_non_split_rounding_size
//    (20 MiB) or more;
//  - splitting: the rest of a block is split off when it is 512 B or more (small pool, or every
//    pool with expandable segments), or over 1 MiB for a request under max_split_size (large pool);
//  - freeing merges a block with its free neighbours of the same segment;
//  - malloc: get_free_block; else (garbage collection first where a threshold and an allowed
//    maximum are set) alloc_block, then release_available_cached_blocks (max_split_size set: free
//    oversize cached segments, the largest first) and alloc_block, then release_cached_blocks (free
//    every cached segment that is not split) and alloc_block; then out of memory;
//  - garbage_collection_threshold: before a new segment, when reserved exceeds the threshold times
//    the allowed maximum, free unsplit large cached segments whose age (get_free_block calls on their
//    pool since they were freed) is at least the mean, until reserved is back under it;
//  - expandable segments: one virtual range per stream and pool, pages of 2 MiB (small) or 20 MiB
//    (large) mapped as blocks need them (best fit counts the unmapped room after a block), and
//    unmapped, whole pages only, by release_cached_blocks and emptyCache.
// Not modelled: CUDA graph pools and captures, the free-memory callbacks (none are registered in a
// plain PyTorch process), events polled for record_stream (a block used on another stream makes its
// own stream wait on that one at free instead), IPC, and addresses: among equal sizes PyTorch takes
// the lowest address, the twin the oldest segment (then the lowest offset in it), which is the same
// where the driver hands out rising addresses and, unlike host addresses, the same in every replay.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpumem/memory_resource.hpp"
#include "gpumem/vmm.hpp"
#include "gpumem/stream_ordering.hpp"

namespace gpumem {

struct caching_options {
  // PYTORCH_CUDA_ALLOC_CONF's roundup_power2_divisions: "" (off), one count ("4"), or counts per
  // power-of-two interval in MiB ("[256:1,512:2,>:8]"); every count a power of two (0: off there).
  std::string roundup_power2_divisions;
  std::size_t max_split_size_bytes = 0;           // 0: unset (PyTorch's SIZE_MAX); else >= 20 MiB
  std::size_t max_non_split_rounding_bytes = 20u << 20;  // max_non_split_rounding_mb; >= 20 MiB
  double garbage_collection_threshold = 0;        // 0: off; else in (0, 1)
  // torch.cuda.set_per_process_memory_fraction as bytes (allowed_memory_maximum): no new segment past
  // it, and garbage collection's base. 0: unset.
  std::size_t allowed_memory_bytes = 0;
  bool expandable_segments = false;
  // The virtual range of each expandable segment (0: 9/8 of the device's memory as PyTorch takes,
  // 64 GiB where the memory does not say its size, as on the host).
  std::size_t expandable_address_space_bytes = 0;
};

// round_size of PyTorch's allocator under `divisions` (16 counts: interval i holds sizes of
// [2^(20+i), 2^(21+i)) bytes, the first also everything smaller, the last everything larger).
std::size_t caching_round_size(std::size_t bytes, const std::vector<std::size_t>& divisions);
// get_allocation_size: the segment a request of `rounded` bytes gets when none of the cache fits.
std::size_t caching_allocation_size(std::size_t rounded);
// Parses roundup_power2_divisions as PyTorch does (16 counts); throws invalid_argument
// (roundupPower2Divisions) for a malformed text or a count or interval that is not a power of two.
std::vector<std::size_t> parse_roundup_power2_divisions(const std::string& text);

class caching_resource final : public memory_resource {
 public:
  static constexpr std::size_t min_block_bytes = 512;          // kMinBlockSize
  static constexpr std::size_t small_size = 1u << 20;          // kSmallSize
  static constexpr std::size_t small_buffer = 2u << 20;        // kSmallBuffer
  static constexpr std::size_t large_buffer = 20u << 20;       // kLargeBuffer
  static constexpr std::size_t min_large_alloc = 10u << 20;    // kMinLargeAlloc
  static constexpr std::size_t round_large = 2u << 20;         // kRoundLarge

  // Segments from cudaMalloc (or host memory): `upstream` is not owned and must outlive this.
  // options.expandable_segments must be false.
  explicit caching_resource(memory_resource& upstream, caching_options options = {},
                            std::unique_ptr<stream_ordering> ordering = nullptr);
  // Expandable segments over `memory` (its granule must divide 2 MiB): options.expandable_segments
  // must be true.
  caching_resource(std::unique_ptr<vmm> memory, caching_options options,
                   std::unique_ptr<stream_ordering> ordering = nullptr);
  ~caching_resource() override;  // gives every segment back

  const caching_options& options() const noexcept;

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) override;
  void do_record_stream(void* ptr, stream_handle stream) override;
  resource_stats do_stats() const override;
  void do_reset_peak() override;
  void do_trim(std::size_t bytes_to_keep) override;
  std::size_t do_allocation_size(const void* ptr) const override;
  memory_kind do_kind() const noexcept override;
  int do_device() const noexcept override;

  struct impl;
  std::unique_ptr<impl> impl_;
};

// Strategy 'caching' (its options in a chain_spec: spec.options<caching_spec>()).
struct caching_spec {
  placement upstream = placement::device;  // where the memory comes from (option values "cuda", "host")
  caching_options options;
};

}  // namespace gpumem
