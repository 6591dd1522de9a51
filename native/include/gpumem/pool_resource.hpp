// The caching block pool: blocks carved from large upstream segments, as PyTorch's caching
// allocator does, with RMM's stream-ordered reuse.
//
//  - sizes are rounded up to 512 bytes;
//  - small requests (<= small_request_limit, 1 MiB) are packed into small segments (2 MiB); large
//    requests get large segments rounded up to 2 MiB; small and large blocks never share a segment;
//  - best fit: the smallest free block of the right class, on the same stream, that fits; the rest
//    of the block is split off as a free block; freed blocks coalesce with free neighbours of the
//    same segment and stream, and in large segments with those of other streams too;
//  - free lists are per stream: memory freed on stream A is reused on A at once. A request on B
//    that A's free memory can serve takes it after making B wait on an event recorded on A, instead
//    of growing the pool. A block that merged memory freed on other streams remembers them, and the
//    stream that takes it waits on an event recorded on each first;
//  - record_stream(p, s) marks p used on s; when p is freed, an event is recorded on every such
//    stream and the block only returns to the free lists once they have all completed;
//  - on upstream out_of_memory, every cached free segment is released and the request retried once;
//  - trim() releases every free segment; max_reserved_bytes caps what the pool takes upstream;
//  - thread-safe.
//
// Destroyed streams. The pool keys free lists, and the lists of streams to wait on, by stream
// handle, so it must hear of a stream before the stream is destroyed: it is a stream_observer
// (stream_ordering.hpp). destroy_stream (Stream#destroy in TypeScript) synchronises the stream and
// tells the pool, which then, with no driver call: moves the blocks freed on that stream, now idle,
// to the default stream's free list (other streams borrow them behind an event on the default
// stream, as any borrow); drops the stream from every list of streams to wait on (merged free
// blocks, record_stream); and forgets its free list, so that a new stream given the same handle
// starts with none. The contract: while the pool holds memory freed on a stream, or record_stream
// named it, the stream must be destroyed through destroy_stream, or synchronised and announced with
// notify_stream_destroyed before cudaStreamDestroy. A stream destroyed behind the pool's back stays
// in its lists: the next allocation that borrows its blocks, or free that records an event on it,
// fails with a cuda_error (cudaEventRecord on an invalid handle) and the memory stays cached; and if
// a new stream gets the old handle, it takes the old stream's blocks as its own with no wait, which
// is a race if work queued on the old stream was still running.
#pragma once
#include <cstddef>
#include <memory>

#include "gpumem/memory_resource.hpp"
#include "gpumem/stream_ordering.hpp"

namespace gpumem {

struct pool_options {
  std::size_t max_reserved_bytes = 0;               // 0: no cap beyond the upstream's own
  std::size_t small_request_limit = 1u << 20;       // requests up to this size are "small"
  std::size_t small_segment_bytes = 2u << 20;       // small requests share segments of this size
  std::size_t large_segment_rounding = 2u << 20;    // large segments are rounded up to this
};

class pool_resource final : public memory_resource {
 public:
  static constexpr std::size_t rounding = 512;

  // `upstream` is not owned and must outlive the pool. `ordering` defaults to the one matching the
  // upstream's memory kind (CUDA events for device memory, nothing for host memory).
  explicit pool_resource(memory_resource& upstream, pool_options options = {},
                         std::unique_ptr<stream_ordering> ordering = nullptr);
  ~pool_resource() override;  // gives every segment back to the upstream

  memory_resource& upstream() const noexcept;
  const pool_options& options() const noexcept;

  // Blocks parked after free() that wait on events from record_stream (for tests and stats).
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

  struct impl;
  std::unique_ptr<impl> impl_;
};

// Strategy 'pool' (its options in a chain_spec: spec.options<pool_spec>()).
struct pool_spec {
  placement upstream = placement::device;  // where the segments come from (option values "cuda", "host")
  pool_options options;
};

}  // namespace gpumem
