// pool_resource across streams, with a fake stream_ordering whose events the test completes: per
// stream free lists, borrowing another stream's memory behind an event, record_stream.
#include <cstdint>
#include <memory>

#include <doctest/doctest.h>

#include "fake_ordering.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/pool_resource.hpp"
#include "pool_test_support.hpp"

using namespace gpumem;
using namespace gpumem::test;

namespace {

// Unlike pool_fixture, holds the pool by pointer: a test destroys it, then checks the log and the host.
struct fixture {
  std::shared_ptr<fake_ordering_log> log = std::make_shared<fake_ordering_log>();
  host_resource host;
  std::unique_ptr<pool_resource> pool =
      std::make_unique<pool_resource>(host, pool_options{}, gpumem::test::make_fake_ordering(log));
};

}  // namespace

TEST_CASE("memory freed on a stream is reused on it without events") {
  fixture f;
  void* p = f.pool->allocate(4 * KiB, stream_a);
  f.pool->deallocate(p, 4 * KiB, stream_a);
  void* q = f.pool->allocate(4 * KiB, stream_a);
  CHECK_EQ(addr(q), addr(p));
  CHECK_EQ(f.log->records, 0u);
  CHECK_EQ(f.log->waits.size(), 0u);
  f.pool->deallocate(q, 4 * KiB, stream_a);
}

TEST_CASE("another streams free memory is borrowed behind one event") {
  fixture f;
  void* p = f.pool->allocate(4 * KiB, stream_a);
  f.pool->deallocate(p, 4 * KiB, stream_a);  // A now holds the whole segment, free
  void* q = f.pool->allocate(4 * KiB, stream_b);
  CHECK_EQ(addr(q), addr(p));
  CHECK_EQ(f.log->records, 1u);
  CHECK_EQ(f.log->records_on(stream_a), 1u);
  REQUIRE_EQ(f.log->waits.size(), 1u);
  CHECK_EQ(f.log->waits[0].stream, stream_b);
  CHECK_EQ(f.log->waits[0].event->stream, stream_a);
  CHECK_EQ(f.log->unreleased(), 0u);
  CHECK_EQ(f.pool->stats().upstream_alloc_count, 1u);

  // The rest of the segment stayed A's: A reuses it at once.
  void* r = f.pool->allocate(4 * KiB, stream_a);
  CHECK_EQ(addr(r), addr(p) + 4 * KiB);
  CHECK_EQ(f.log->records, 1u);

  // Freed on B, the block is B's: B reuses it without an event.
  f.pool->deallocate(q, 4 * KiB, stream_b);
  void* s = f.pool->allocate(4 * KiB, stream_b);
  CHECK_EQ(addr(s), addr(q));
  CHECK_EQ(f.log->records, 1u);
  CHECK_EQ(f.log->waits.size(), 1u);
  f.pool->deallocate(s, 4 * KiB, stream_b);
  f.pool->deallocate(r, 4 * KiB, stream_a);
}

TEST_CASE("borrowing picks the best fit over all other streams") {
  fixture f;
  void* x = f.pool->allocate(64 * KiB, stream_a);
  void* sep1 = f.pool->allocate(512, stream_a);
  void* y = f.pool->allocate(16 * KiB, stream_a);
  void* sep2 = f.pool->allocate(512, stream_a);
  f.pool->deallocate(x, 64 * KiB, stream_a);  // A: 64 KiB free (+ the tail)
  f.pool->deallocate(y, 16 * KiB, stream_c);  // C: 16 KiB free
  void* z = f.pool->allocate(12 * KiB, stream_b);
  CHECK_EQ(addr(z), addr(y));
  CHECK_EQ(f.log->records_on(stream_c), 1u);
  CHECK_EQ(f.log->records_on(stream_a), 0u);
  CHECK_EQ(f.log->waits_on(stream_b), 1u);
  f.pool->deallocate(z, 12 * KiB, stream_b);
  f.pool->deallocate(sep1, 512, stream_a);
  f.pool->deallocate(sep2, 512, stream_a);
}

TEST_CASE("small and large classes stay apart across streams") {
  fixture f;
  void* big = f.pool->allocate(3 * MiB, stream_a);
  f.pool->deallocate(big, 3 * MiB, stream_a);  // A: one free 4 MiB large block
  void* tiny = f.pool->allocate(1000, stream_b);  // small: must not borrow A's large block
  CHECK_EQ(f.log->records, 0u);
  CHECK_EQ(f.pool->stats().segment_count, 2u);
  f.pool->deallocate(tiny, 1000, stream_b);
}

TEST_CASE("record stream parks a freed block until its event completes") {
  fixture f;
  void* p = f.pool->allocate(8 * KiB, stream_a);
  f.pool->record_stream(p, stream_b);
  f.pool->deallocate(p, 8 * KiB, stream_a);
  CHECK_EQ(f.pool->pending_free_blocks(), 1u);
  CHECK_EQ(f.log->records_on(stream_b), 1u);
  resource_stats s = f.pool->stats();
  CHECK_EQ(s.allocated_bytes, 0u);  // the caller gave it back
  CHECK_EQ(s.free_count, 1u);
  CHECK_EQ(s.largest_free_block, static_cast<std::int64_t>(2 * MiB - 8 * KiB));  // pending is not free

  void* q = f.pool->allocate(8 * KiB, stream_a);  // p is still in use on B
  CHECK(addr(q) != addr(p));
  CHECK_EQ(addr(q), addr(p) + 8 * KiB);
  CHECK_EQ(f.pool->pending_free_blocks(), 1u);

  f.log->complete_all();
  CHECK_EQ(f.pool->pending_free_blocks(), 0u);
  CHECK_EQ(f.log->unreleased(), 0u);
  void* r = f.pool->allocate(8 * KiB, stream_a);
  CHECK_EQ(addr(r), addr(p));
  CHECK_EQ(f.pool->stats().upstream_alloc_count, 1u);
  f.pool->deallocate(q, 8 * KiB, stream_a);
  f.pool->deallocate(r, 8 * KiB, stream_a);
  CHECK_EQ(f.pool->stats().largest_free_block, static_cast<std::int64_t>(2 * MiB));
}

TEST_CASE("a pending block is freed by the next allocation once complete") {
  fixture f;
  void* p = f.pool->allocate(1 * MiB, stream_a);
  void* q = f.pool->allocate(1 * MiB, stream_a);  // the segment is full
  f.pool->record_stream(p, stream_b);
  f.pool->record_stream(p, stream_c);
  f.pool->deallocate(p, 1 * MiB, stream_a);
  CHECK_EQ(f.log->records, 2u);
  void* r = f.pool->allocate(1 * MiB, stream_a);  // p pending: a new segment
  CHECK_EQ(f.pool->stats().upstream_alloc_count, 2u);
  CHECK(addr(r) != addr(p));
  void* r2 = f.pool->allocate(1 * MiB, stream_a);  // fills the new segment: p is the only candidate next
  f.log->events[0]->complete = true;  // B done, C not yet
  CHECK_EQ(f.pool->pending_free_blocks(), 1u);
  f.log->events[1]->complete = true;
  void* s = f.pool->allocate(1 * MiB, stream_a);  // processes the pending list first
  CHECK_EQ(addr(s), addr(p));
  CHECK_EQ(f.pool->stats().upstream_alloc_count, 2u);
  for (void* x : {q, r, r2, s}) f.pool->deallocate(x, 1 * MiB, stream_a);
}

TEST_CASE("record stream on the own stream or twice records once") {
  fixture f;
  void* p = f.pool->allocate(4 * KiB, stream_a);
  f.pool->record_stream(p, stream_a);  // its own stream: nothing to do
  f.pool->deallocate(p, 4 * KiB, stream_b);  // even when freed on another stream
  CHECK_EQ(f.pool->pending_free_blocks(), 0u);
  CHECK_EQ(f.log->records, 0u);
  void* p2 = f.pool->allocate(4 * KiB, stream_b);
  CHECK_EQ(addr(p2), addr(p));
  f.pool->deallocate(p2, 4 * KiB, stream_a);
  f.pool->trim(0);  // back to an empty pool for the next case
  CHECK_EQ(f.log->records, 0u);

  void* q = f.pool->allocate(4 * KiB, stream_a);
  f.pool->record_stream(q, stream_b);
  f.pool->record_stream(q, stream_b);
  f.pool->deallocate(q, 4 * KiB, stream_a);
  CHECK_EQ(f.log->records, 1u);
  CHECK_EQ(f.pool->pending_free_blocks(), 1u);

  // Freed on the stream it was recorded on: that stream orders the reuse itself.
  void* r = f.pool->allocate(4 * KiB, stream_a);
  f.pool->record_stream(r, stream_b);
  f.pool->deallocate(r, 4 * KiB, stream_b);
  CHECK_EQ(f.log->records, 1u);
  CHECK_EQ(f.pool->pending_free_blocks(), 1u);  // still only q
  f.log->complete_all();
  CHECK_EQ(f.pool->pending_free_blocks(), 0u);
}

TEST_CASE("record stream rejects pointers that are not live") {
  fixture f;
  int on_stack = 0;
  CHECK_THROWS_AS(f.pool->record_stream(&on_stack, stream_b), invalid_argument);
  void* p = f.pool->allocate(4 * KiB, stream_a);
  CHECK_THROWS_AS(f.pool->record_stream(static_cast<char*>(p) + 512, stream_b), invalid_argument);
  f.pool->deallocate(p, 4 * KiB, stream_a);
  CHECK_THROWS_AS(f.pool->record_stream(p, stream_b), invalid_argument);
  CHECK_EQ(f.log->records, 0u);
}

TEST_CASE("a block freed on another stream joins that streams free list") {
  fixture f;
  void* p = f.pool->allocate(4 * KiB, stream_a);
  void* keep = f.pool->allocate(4 * KiB, stream_a);  // stops p merging with A's tail
  f.pool->deallocate(p, 4 * KiB, stream_b);
  void* q = f.pool->allocate(4 * KiB, stream_b);
  CHECK_EQ(addr(q), addr(p));
  CHECK_EQ(f.log->records, 0u);
  f.pool->deallocate(q, 4 * KiB, stream_b);
  f.pool->deallocate(keep, 4 * KiB, stream_a);
  // Free neighbours of different streams do not merge: p stays a separate 4 KiB block.
  CHECK_EQ(f.pool->stats().largest_free_block, static_cast<std::int64_t>(2 * MiB - 4 * KiB));
}

TEST_CASE("trim joins the streams of a segment before releasing it") {
  fixture f;
  void* p = f.pool->allocate(4 * KiB, stream_a);
  void* q = f.pool->allocate(4 * KiB, stream_a);
  f.pool->deallocate(p, 4 * KiB, stream_a);
  f.pool->deallocate(q, 4 * KiB, stream_b);  // the segment: A, B, A
  f.pool->trim(0);
  CHECK_EQ(f.pool->stats().reserved_bytes, 0u);
  CHECK_EQ(f.log->records_on(stream_b), 1u);
  CHECK_EQ(f.log->waits_on(stream_a), 1u);
  CHECK_EQ(f.log->unreleased(), 0u);
}

TEST_CASE("trim frees completed pending blocks and releases their segments") {
  fixture f;
  void* p = f.pool->allocate(4 * KiB, stream_a);
  f.pool->record_stream(p, stream_b);
  f.pool->deallocate(p, 4 * KiB, stream_a);
  f.pool->trim(0);  // the event has not completed: the segment holds a pending block
  CHECK_EQ(f.pool->stats().reserved_bytes, 2 * MiB);
  f.log->complete_all();
  f.pool->trim(0);
  CHECK_EQ(f.pool->stats().reserved_bytes, 0u);
  CHECK_EQ(f.pool->pending_free_blocks(), 0u);
}

TEST_CASE("destroying the pool waits for and releases pending events") {
  fixture f;
  void* p = f.pool->allocate(4 * KiB, stream_a);
  f.pool->record_stream(p, stream_b);
  f.pool->deallocate(p, 4 * KiB, stream_a);
  CHECK_EQ(f.log->unreleased(), 1u);
  f.pool.reset();
  CHECK_EQ(f.log->synchronizes, 1u);
  CHECK_EQ(f.log->unreleased(), 0u);
  CHECK_EQ(f.host.stats().allocated_bytes, 0u);
}
