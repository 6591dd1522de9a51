// pool_resource when memory runs out: release-and-retry on upstream out_of_memory, the
// max_reserved_bytes cap, and that a failed allocation leaves the pool as it was.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "fake_ordering.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/limiting_adaptor.hpp"
#include "gpumem/pool_resource.hpp"
#include "pool_test_support.hpp"

using namespace gpumem;
using namespace gpumem::test;

TEST_CASE("upstream oom releases cached segments and retries") {
  host_resource host;
  limiting_adaptor limited(host, 8 * MiB);
  pool_resource pool(limited);
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(pool.allocate(1 * MiB));  // 4 small segments: the limit
  for (void* p : blocks) pool.deallocate(p, 1 * MiB);
  CHECK_EQ(pool.stats().reserved_bytes, 8 * MiB);
  CHECK_EQ(pool.stats().upstream_free_count, 0u);

  // Large: cannot use the cached small segments, and the limit refuses a new one until they go.
  void* large = pool.allocate(4 * MiB);
  resource_stats s = pool.stats();
  CHECK_EQ(s.upstream_free_count, 4u);
  CHECK_EQ(s.upstream_alloc_count, 5u);
  CHECK_EQ(s.segment_count, 1u);
  CHECK_EQ(s.reserved_bytes, 4 * MiB);
  CHECK_EQ(s.oom_count, 0u);
  CHECK_EQ(limited.used(), 4 * MiB);

  // Never fits under the limit: out_of_memory with the request and a stats snapshot.
  try {
    pool.allocate(16 * MiB);
    CHECK(false);
  } catch (const out_of_memory& e) {
    CHECK_EQ(e.requested_bytes(), 16 * MiB);
    CHECK_EQ(e.stats().oom_count, 1u);
    CHECK_EQ(e.stats().allocated_bytes, 4 * MiB);
    CHECK_EQ(e.stats().reserved_bytes, 4 * MiB);
    const std::string message = e.what();
    CHECK(message.find("16.00 MiB") != std::string::npos);
    CHECK(message.find("4.00 MiB") != std::string::npos);  // reserved and allocated
  }
  s = pool.stats();
  CHECK_EQ(s.oom_count, 1u);
  CHECK_EQ(s.allocated_bytes, 4 * MiB);
  CHECK_EQ(s.alloc_count, 9u);
  CHECK_EQ(s.segment_count, 1u);
  CHECK_EQ(pool.allocation_size(large), 4 * MiB);

  // Still works.
  void* small = pool.allocate(1000);
  CHECK_EQ(pool.stats().reserved_bytes, 6 * MiB);
  pool.deallocate(small, 1000);
  pool.deallocate(large, 4 * MiB);
  pool.trim(0);
  CHECK_EQ(pool.stats().reserved_bytes, 0u);
  CHECK_EQ(limited.used(), 0u);
}

TEST_CASE("a retry that cannot help fails without releasing live memory") {
  host_resource host;
  limiting_adaptor limited(host, 4 * MiB);
  pool_resource pool(limited);
  void* a = pool.allocate(1 * MiB);
  void* b = pool.allocate(1 * MiB);
  void* c = pool.allocate(1 * MiB);
  void* d = pool.allocate(1 * MiB);
  CHECK_THROWS_AS(pool.allocate(1), out_of_memory);  // both segments full; no free segment to drop
  resource_stats s = pool.stats();
  CHECK_EQ(s.oom_count, 1u);
  CHECK_EQ(s.segment_count, 2u);
  CHECK_EQ(s.upstream_free_count, 0u);
  CHECK_EQ(s.allocated_bytes, 4 * MiB);
  pool.deallocate(a, 1 * MiB);
  void* e = pool.allocate(1);  // freed memory is reused
  CHECK_EQ(addr(e), addr(a));
  for (auto [p, n] : std::vector<std::pair<void*, std::size_t>>{{b, MiB}, {c, MiB}, {d, MiB}, {e, 1}}) {
    pool.deallocate(p, n);
  }
}

TEST_CASE("upstream oom waits for pending blocks and reuses them") {
  auto log = std::make_shared<gpumem::test::fake_ordering_log>();
  host_resource host;
  limiting_adaptor limited(host, 2 * MiB);
  pool_resource pool(limited, {}, gpumem::test::make_fake_ordering(log));
  const stream_handle a = stream_key(1), b = stream_key(2);
  void* p = pool.allocate(1 * MiB, a);
  void* q = pool.allocate(1 * MiB, a);
  pool.record_stream(p, b);
  pool.deallocate(p, 1 * MiB, a);
  CHECK_EQ(pool.pending_free_blocks(), 1u);
  // The only memory is p, parked on an incomplete event: the pool waits for it instead of failing.
  void* r = pool.allocate(1 * MiB, a);
  CHECK_EQ(addr(r), addr(p));
  CHECK_EQ(log->synchronizes, 1u);
  CHECK_EQ(pool.pending_free_blocks(), 0u);
  CHECK_EQ(pool.stats().oom_count, 0u);
  CHECK_EQ(pool.stats().upstream_alloc_count, 1u);
  pool.deallocate(r, 1 * MiB, a);
  pool.deallocate(q, 1 * MiB, a);
}

TEST_CASE("max reserved bytes caps growth") {
  host_resource host;
  pool_options options;
  options.max_reserved_bytes = 4 * MiB;
  pool_resource pool(host, options);
  void* big = pool.allocate(2 * MiB + 512 * KiB);  // a 4 MiB segment: the whole cap
  try {
    pool.allocate(1000);  // needs a 2 MiB small segment
    CHECK(false);
  } catch (const out_of_memory& e) {
    CHECK_EQ(e.requested_bytes(), 1000u);
    CHECK_EQ(e.stats().oom_count, 1u);
    CHECK(std::string(e.what()).find("max_reserved_bytes") != std::string::npos);
  }
  resource_stats s = pool.stats();
  CHECK_EQ(s.allocated_bytes, 2 * MiB + 512 * KiB);
  CHECK_EQ(s.reserved_bytes, 4 * MiB);
  CHECK_EQ(s.segment_count, 1u);
  CHECK_EQ(s.oom_count, 1u);
  CHECK_EQ(s.alloc_count, 1u);
  CHECK_EQ(host.stats().allocated_bytes, 4 * MiB);  // the upstream was not even asked

  void* tail = pool.allocate(1 * MiB + 1);  // large: fits the large segment's free tail
  CHECK_EQ(addr(tail), addr(big) + 2 * MiB + 512 * KiB);
  pool.deallocate(tail, 1 * MiB + 1);

  CHECK_THROWS_AS(pool.allocate(5 * MiB), out_of_memory);  // larger than the cap itself
  CHECK_EQ(pool.stats().segment_count, 1u);                 // and nothing was released for it

  // Once the large segment is free, a small request releases it to make room under the cap.
  pool.deallocate(big, 2 * MiB + 512 * KiB);
  void* small = pool.allocate(1000);
  s = pool.stats();
  CHECK_EQ(s.upstream_free_count, 1u);
  CHECK_EQ(s.reserved_bytes, 2 * MiB);
  CHECK_EQ(s.oom_count, 2u);
  pool.deallocate(small, 1000);
}

TEST_CASE("the cap releases only what a new segment needs") {
  host_resource host;
  pool_options options;
  options.max_reserved_bytes = 8 * MiB;
  pool_resource pool(host, options);
  void* live = pool.allocate(3 * MiB);           // a 4 MiB segment
  void* x = pool.allocate(1 * MiB + 512 * KiB);  // two free 2 MiB large segments after this
  void* y = pool.allocate(1 * MiB + 512 * KiB);
  pool.deallocate(x, 1 * MiB + 512 * KiB);
  pool.deallocate(y, 1 * MiB + 512 * KiB);
  CHECK_EQ(pool.stats().reserved_bytes, 8 * MiB);
  void* small = pool.allocate(1000);  // a 2 MiB small segment: one free segment must go
  resource_stats s = pool.stats();
  CHECK_EQ(s.upstream_free_count, 1u);
  CHECK_EQ(s.reserved_bytes, 8 * MiB);
  CHECK_EQ(s.largest_free_block, static_cast<std::int64_t>(2 * MiB));  // the other one stays cached
  CHECK_EQ(s.oom_count, 0u);
  pool.deallocate(small, 1000);
  pool.deallocate(live, 3 * MiB);
}

TEST_CASE("impossible sizes are out of memory") {
  host_resource host;
  limiting_adaptor limited(host, 64 * MiB);  // refuses before the host is asked for absurd sizes
  pool_resource pool(limited);
  const std::size_t huge = std::numeric_limits<std::size_t>::max();
  CHECK_THROWS_AS(pool.allocate(huge), out_of_memory);  // rounding it up would overflow
  CHECK_THROWS_AS(pool.allocate(huge - 4 * MiB), out_of_memory);
  CHECK_THROWS_AS(pool.allocate(std::size_t{1} << 60), out_of_memory);
  const resource_stats s = pool.stats();
  CHECK_EQ(s.oom_count, 3u);
  CHECK_EQ(s.reserved_bytes, 0u);
  CHECK_EQ(s.alloc_count, 0u);
  void* p = pool.allocate(10);
  pool.deallocate(p, 10);
}
