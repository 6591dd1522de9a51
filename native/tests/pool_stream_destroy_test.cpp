// pool_resource when a stream it caches memory for is destroyed: told through
// notify_stream_destroyed (as destroy_stream does after synchronising the stream), the pool never
// records an event on, or waits with, the destroyed stream again; the memory freed on it stays
// reusable; merged blocks and record_stream lists stop naming it; and a new stream given the same
// handle starts afresh. Host memory with a fake stream_ordering whose destroyed streams fail as
// CUDA's do.
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "fake_ordering.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/pool_resource.hpp"
#include "pool_test_support.hpp"

using namespace gpumem;
using namespace gpumem::test;

namespace {

const stream_handle default_stream = nullptr;
const stream_handle stream_s1 = stream_key(0x51);
const stream_handle stream_s2 = stream_key(0x52);

}  // namespace

// The scenario found on a GPU: memory cached on S1, S1 destroyed, then an allocation on S2.
TEST_CASE("memory freed on a destroyed stream is reused without touching that stream") {
  pool_fixture f;
  void* p = f.pool.allocate(4 * KiB, stream_s1);
  f.pool.deallocate(p, 4 * KiB, stream_s1);  // S1 holds the whole small segment, free
  f.log->destroy_stream(stream_s1);

  void* q = f.pool.allocate(4 * KiB, stream_s2);
  CHECK_EQ(addr(q), addr(p));
  CHECK_EQ(f.log->records_on(stream_s1), 0u);
  CHECK_EQ(f.log->waits_on(stream_s1), 0u);
  // The memory is the default stream's now: S2 borrows it behind one event, as from any stream.
  CHECK_EQ(f.log->records, 1u);
  CHECK(waited(*f.log, stream_s2, default_stream));
  // The rest of the segment is the default stream's: reused there with no event.
  void* r = f.pool.allocate(4 * KiB, default_stream);
  CHECK_EQ(addr(r), addr(p) + 4 * KiB);
  CHECK_EQ(f.log->records, 1u);

  resource_stats s = f.pool.stats();
  CHECK_EQ(s.allocated_bytes, 8 * KiB);
  CHECK_EQ(s.reserved_bytes, 2 * MiB);
  CHECK_EQ(s.upstream_alloc_count, 1u);
  CHECK_EQ(s.alloc_count, 3u);
  CHECK_EQ(s.free_count, 1u);
  CHECK_EQ(s.segment_count, 1u);
  f.pool.deallocate(q, 4 * KiB, stream_s2);
  f.pool.deallocate(r, 4 * KiB, default_stream);
  s = f.pool.stats();
  CHECK_EQ(s.allocated_bytes, 0u);
  CHECK_EQ(s.reserved_bytes, 2 * MiB);
  CHECK_EQ(f.log->unreleased(), 0u);
}

// What the contract in pool_resource.hpp warns of: the same scenario with a stream destroyed
// behind the pool's back fails as it did on the GPU, and leaves the pool as it was.
TEST_CASE("a stream destroyed without notice makes the borrow fail cleanly") {
  pool_fixture f;
  void* p = f.pool.allocate(4 * KiB, stream_s1);
  f.pool.deallocate(p, 4 * KiB, stream_s1);
  f.log->destroy_stream(stream_s1, /*notify=*/false);
  CHECK_THROWS_AS(f.pool.allocate(4 * KiB, stream_s2), cuda_error);
  CHECK_EQ(f.pool.stats().allocated_bytes, 0u);
  CHECK_EQ(f.pool.stats().upstream_alloc_count, 1u);
  CHECK_EQ(f.log->unreleased(), 0u);
  // Told late (after the fact, which is all that can still be done), the pool recovers.
  notify_stream_destroyed(stream_s1);
  void* q = f.pool.allocate(4 * KiB, stream_s2);
  CHECK_EQ(addr(q), addr(p));
  CHECK_EQ(f.pool.stats().upstream_alloc_count, 1u);
  f.pool.deallocate(q, 4 * KiB, stream_s2);
}

TEST_CASE("a merged block no longer waits for a destroyed stream") {
  pool_fixture f;
  void* whole = f.pool.allocate(8 * MiB, stream_a);
  f.pool.deallocate(whole, 8 * MiB, stream_a);
  void* pieces[4];
  for (void*& p : pieces) p = f.pool.allocate(2 * MiB, stream_a);
  const stream_handle freeing[4] = {stream_a, stream_s1, stream_c, stream_b};
  for (int i = 0; i < 4; ++i) f.pool.deallocate(pieces[i], 2 * MiB, freeing[i]);
  // One 8 MiB block, free on B, that waits for A, S1 and C.
  CHECK_EQ(f.pool.stats().largest_free_block, static_cast<std::int64_t>(8 * MiB));
  f.log->destroy_stream(stream_s1);

  void* again = f.pool.allocate(8 * MiB, stream_s2);
  CHECK_EQ(addr(again), addr(whole));
  CHECK_EQ(f.log->records_on(stream_s1), 0u);
  CHECK_EQ(f.log->waits_on(stream_s2), 3u);  // B (the owner), A and C
  CHECK(waited(*f.log, stream_s2, stream_a));
  CHECK(waited(*f.log, stream_s2, stream_b));
  CHECK(waited(*f.log, stream_s2, stream_c));
  CHECK_EQ(f.pool.stats().upstream_alloc_count, 1u);
  CHECK_EQ(f.pool.stats().allocated_bytes, 8 * MiB);
  f.pool.deallocate(again, 8 * MiB, stream_s2);
  CHECK_EQ(f.log->unreleased(), 0u);
}

TEST_CASE("a merged block owned by the destroyed stream moves to the default stream with its other streams") {
  pool_fixture f;
  void* whole = f.pool.allocate(8 * MiB, stream_a);
  f.pool.deallocate(whole, 8 * MiB, stream_a);
  void* x = f.pool.allocate(4 * MiB, stream_a);
  void* y = f.pool.allocate(4 * MiB, stream_a);
  f.pool.deallocate(x, 4 * MiB, stream_a);
  f.pool.deallocate(y, 4 * MiB, stream_s1);  // one 8 MiB block of S1's, holding A's memory
  f.log->destroy_stream(stream_s1);

  // Taken on the default stream: it still waits for A, never for S1.
  void* on_default = f.pool.allocate(8 * MiB, default_stream);
  CHECK_EQ(addr(on_default), addr(whole));
  CHECK_EQ(f.log->records_on(stream_s1), 0u);
  CHECK_EQ(f.log->records, 1u);
  CHECK(waited(*f.log, default_stream, stream_a));
  f.pool.deallocate(on_default, 8 * MiB, default_stream);
  // Freed on the default stream and taken there again: no event.
  void* again = f.pool.allocate(8 * MiB, default_stream);
  CHECK_EQ(addr(again), addr(whole));
  CHECK_EQ(f.log->records, 1u);
  f.pool.deallocate(again, 8 * MiB, default_stream);
  CHECK_EQ(f.pool.stats().upstream_alloc_count, 1u);
}

TEST_CASE("blocks of the destroyed stream merge with the default streams in a small segment") {
  pool_fixture f;
  void* x = f.pool.allocate(4 * KiB, default_stream);
  void* y = f.pool.allocate(4 * KiB, default_stream);
  void* z = f.pool.allocate(4 * KiB, default_stream);  // keeps x and y from the rest of the segment
  f.pool.deallocate(x, 4 * KiB, default_stream);
  f.pool.deallocate(y, 4 * KiB, stream_s1);  // small segments merge only within a stream: apart
  f.log->destroy_stream(stream_s1);
  void* xy = f.pool.allocate(8 * KiB, default_stream);
  CHECK_EQ(addr(xy), addr(x));  // merged into one 8 KiB block on the default stream
  CHECK_EQ(f.log->records, 0u);
  CHECK_EQ(f.pool.stats().upstream_alloc_count, 1u);
  f.pool.deallocate(xy, 8 * KiB, default_stream);
  f.pool.deallocate(z, 4 * KiB, default_stream);
  CHECK_EQ(f.pool.stats().allocated_bytes, 0u);
}

TEST_CASE("record stream on a destroyed stream is dropped from live blocks") {
  pool_fixture f;
  void* p = f.pool.allocate(4 * KiB, stream_a);
  f.pool.record_stream(p, stream_s1);
  f.log->destroy_stream(stream_s1);
  f.pool.deallocate(p, 4 * KiB, stream_a);  // nothing left to wait for: free at once
  CHECK_EQ(f.log->records, 0u);
  CHECK_EQ(f.pool.pending_free_blocks(), 0u);
  void* q = f.pool.allocate(4 * KiB, stream_a);
  CHECK_EQ(addr(q), addr(p));
  CHECK_EQ(f.log->records, 0u);
  f.pool.deallocate(q, 4 * KiB, stream_a);
}

TEST_CASE("a pending block freed on a destroyed stream joins the default stream when complete") {
  pool_fixture f;
  void* p = f.pool.allocate(4 * KiB, stream_s1);
  f.pool.record_stream(p, stream_b);
  f.pool.deallocate(p, 4 * KiB, stream_s1);  // parked behind an event on B
  CHECK_EQ(f.pool.pending_free_blocks(), 1u);
  f.log->destroy_stream(stream_s1);
  CHECK_EQ(f.pool.pending_free_blocks(), 1u);  // B's work is not S1's: still pending
  f.log->complete_all();
  CHECK_EQ(f.pool.pending_free_blocks(), 0u);
  void* q = f.pool.allocate(4 * KiB, default_stream);
  CHECK_EQ(addr(q), addr(p));
  CHECK_EQ(f.log->records, 1u);  // the one on B, at the free
  CHECK_EQ(f.log->records_on(stream_s1), 0u);
  f.pool.deallocate(q, 4 * KiB, default_stream);
  CHECK_EQ(f.log->unreleased(), 0u);
}

TEST_CASE("an event recorded on the destroyed stream completes with it") {
  pool_fixture f;
  void* p = f.pool.allocate(4 * KiB, stream_a);
  f.pool.record_stream(p, stream_s1);
  f.pool.deallocate(p, 4 * KiB, stream_a);  // parked behind an event on S1
  CHECK_EQ(f.pool.pending_free_blocks(), 1u);
  f.log->destroy_stream(stream_s1);  // synchronised: its event is complete
  CHECK_EQ(f.pool.pending_free_blocks(), 0u);
  void* q = f.pool.allocate(4 * KiB, stream_a);
  CHECK_EQ(addr(q), addr(p));
  f.pool.deallocate(q, 4 * KiB, stream_a);
  CHECK_EQ(f.log->unreleased(), 0u);
}

TEST_CASE("a new stream given a destroyed streams handle starts afresh") {
  pool_fixture f;
  void* live = f.pool.allocate(4 * KiB, stream_s1);  // stays live across the destroy
  void* p = f.pool.allocate(64 * KiB, stream_s1);
  f.pool.deallocate(p, 64 * KiB, stream_s1);
  f.log->destroy_stream(stream_s1);
  f.log->reuse_handle(stream_s1);  // a new stream, same handle

  // The old stream's free memory is not the new one's own: the new stream borrows it from the
  // default stream behind an event, like any other stream would.
  void* q = f.pool.allocate(64 * KiB, stream_s1);
  CHECK_EQ(addr(q), addr(p));
  CHECK_EQ(f.log->records, 1u);
  CHECK(waited(*f.log, stream_s1, default_stream));
  // record_stream with the new stream on the block the old one allocated is not taken for the
  // block's own stream: freeing it on A records an event on the new stream.
  f.pool.record_stream(live, stream_s1);
  f.pool.deallocate(live, 4 * KiB, stream_a);
  CHECK_EQ(f.log->records_on(stream_s1), 1u);
  CHECK_EQ(f.pool.pending_free_blocks(), 1u);
  f.log->complete_all();
  CHECK_EQ(f.pool.pending_free_blocks(), 0u);
  f.pool.deallocate(q, 64 * KiB, stream_s1);
  resource_stats s = f.pool.stats();
  CHECK_EQ(s.allocated_bytes, 0u);
  CHECK_EQ(s.upstream_alloc_count, 1u);
  CHECK_EQ(f.log->unreleased(), 0u);
}

TEST_CASE("trim after a destroy releases segments without the destroyed stream") {
  pool_fixture f;
  void* whole = f.pool.allocate(8 * MiB, stream_a);
  f.pool.deallocate(whole, 8 * MiB, stream_a);
  void* x = f.pool.allocate(4 * MiB, stream_a);
  void* y = f.pool.allocate(4 * MiB, stream_a);
  void* small = f.pool.allocate(4 * KiB, stream_s1);
  f.pool.deallocate(x, 4 * MiB, stream_s1);
  f.pool.deallocate(y, 4 * MiB, stream_a);  // merged: free on A, waiting for S1
  f.pool.deallocate(small, 4 * KiB, stream_s1);
  f.log->destroy_stream(stream_s1);
  // Releasing the large segment joins only A into its release stream; the small one needs nothing.
  f.pool.trim();
  resource_stats s = f.pool.stats();
  CHECK_EQ(s.reserved_bytes, 0u);
  CHECK_EQ(s.segment_count, 0u);
  CHECK_EQ(s.upstream_free_count, 2u);
  CHECK_EQ(f.log->records_on(stream_s1), 0u);
  CHECK_EQ(f.log->waits_on(stream_s1), 0u);
  CHECK_EQ(f.log->unreleased(), 0u);
}

TEST_CASE("every live pool hears of the destroy and a destroyed pool no longer does") {
  auto log = std::make_shared<fake_ordering_log>();
  host_resource host;
  pool_resource first(host, pool_options{}, gpumem::test::make_fake_ordering(log));
  void* p1 = first.allocate(4 * KiB, stream_s1);
  first.deallocate(p1, 4 * KiB, stream_s1);
  {
    auto gone = std::make_unique<pool_resource>(host, pool_options{}, gpumem::test::make_fake_ordering(log));
    void* p = gone->allocate(4 * KiB, stream_s1);
    gone->deallocate(p, 4 * KiB, stream_s1);
  }  // destroyed: unregistered (AddressSanitizer would see a notification reach it)
  pool_resource second(host, pool_options{}, gpumem::test::make_fake_ordering(log));
  void* p2 = second.allocate(4 * KiB, stream_s1);
  second.deallocate(p2, 4 * KiB, stream_s1);
  log->destroy_stream(stream_s1);
  void* q1 = first.allocate(4 * KiB, stream_s2);
  void* q2 = second.allocate(4 * KiB, stream_s2);
  CHECK_EQ(addr(q1), addr(p1));
  CHECK_EQ(addr(q2), addr(p2));
  CHECK_EQ(log->records_on(stream_s1), 0u);
  first.deallocate(q1, 4 * KiB, stream_s2);
  second.deallocate(q2, 4 * KiB, stream_s2);
}

TEST_CASE("the default stream is never forgotten") {
  pool_fixture f;
  void* p = f.pool.allocate(4 * KiB, default_stream);
  f.pool.deallocate(p, 4 * KiB, default_stream);
  notify_stream_destroyed(default_stream);  // ignored: the default stream cannot be destroyed
  void* q = f.pool.allocate(4 * KiB, default_stream);
  CHECK_EQ(addr(q), addr(p));
  CHECK_EQ(f.log->records, 0u);
  f.pool.deallocate(q, 4 * KiB, default_stream);
}

// Streams created, used and destroyed on some threads while others allocate on their own streams
// from the same pool (run under ThreadSanitizer by hand: GPUMEM_SANITIZE=thread ctest -R
// pool_stream_destroy). Host ordering: every event is complete at once.
TEST_CASE("streams destroyed while other threads allocate") {
  host_resource host;
  pool_resource pool(host);
  constexpr int threads = 4;
  constexpr int rounds = 2000;
  std::atomic<std::uintptr_t> next_stream{0x1000};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const std::size_t sizes[3] = {512, 24 * KiB, (t + 1) * MiB + 512};
      for (int i = 0; i < rounds; ++i) {
        const stream_handle s = stream_key(next_stream.fetch_add(1));
        void* ps[3];
        for (int k = 0; k < 3; ++k) ps[k] = pool.allocate(sizes[k], s);
        for (int k = 0; k < 3; ++k) pool.deallocate(ps[k], sizes[k], s);
        notify_stream_destroyed(s);
      }
    });
  }
  for (auto& w : workers) w.join();
  resource_stats s = pool.stats();
  CHECK_EQ(s.allocated_bytes, 0u);
  CHECK_EQ(s.alloc_count, static_cast<std::uint64_t>(threads * rounds * 3));
  // Every destroyed stream's memory went to the default stream and was borrowed again: the pool
  // holds no more than the threads' live sets at once need, far from a segment per stream.
  CHECK(s.upstream_alloc_count < 40u);
  pool.trim();
  CHECK_EQ(pool.stats().reserved_bytes, 0u);
}
