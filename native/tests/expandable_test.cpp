// expandable_resource on the host twin (mmap): granules mapped in runs as the memory in use grows
// and unmapped (whole runs) on trim and past the release threshold, split and coalesce across granule boundaries,
// the fragmentation cycle that strands a segment pool's memory, gcThreshold, and bad options.
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "fake_ordering.hpp"
#include "gpumem/expandable_resource.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/vmm.hpp"
#include "gpumem/pool_resource.hpp"
#include "pool_test_support.hpp"

using namespace gpumem;
using namespace gpumem::test;

namespace {

constexpr std::size_t granule = 64 * KiB;

// An expandable resource over the host twin with 64 KiB granules and a 64 MiB range per stream.
struct fixture {
  explicit fixture(expandable_options options = small_range(), std::size_t granule_bytes = granule)
      : resource(make_host_vmm(granule_bytes), options, make_fake_ordering(log)) {}
  static expandable_options small_range() {
    expandable_options o;
    o.reserve_bytes = 64 * MiB;
    return o;
  }
  std::shared_ptr<fake_ordering_log> log = std::make_shared<fake_ordering_log>();
  expandable_resource resource;
};

}  // namespace

TEST_CASE("maps granules as the memory in use grows") {
  fixture f;
  CHECK_EQ(f.resource.granule_bytes(), granule);
  CHECK_EQ(f.resource.stats().reserved_bytes, 0u);
  void* a = f.resource.allocate(1000);
  resource_stats s = f.resource.stats();
  CHECK_EQ(s.reserved_bytes, granule);  // one granule, not a segment
  CHECK_EQ(s.segment_count, 1u);
  CHECK_EQ(s.upstream_alloc_count, 1u);
  CHECK_EQ(s.allocated_bytes, 1000u);
  std::memset(a, 0xAB, 1000);  // mapped: writable

  void* b = f.resource.allocate(200 * KiB);  // 512 + 200 KiB: runs into granules 0..3
  CHECK_EQ(addr(b), addr(a) + 1024);         // right after a (1000 rounded to 512 B units)
  s = f.resource.stats();
  CHECK_EQ(s.segment_count, 2u);  // granules 1..3 mapped as one run
  CHECK_EQ(s.upstream_alloc_count, 2u);
  CHECK_EQ(s.reserved_bytes, 4 * granule);
  std::memset(b, 0xCD, 200 * KiB);

  f.resource.deallocate(b, 200 * KiB);
  s = f.resource.stats();
  CHECK_EQ(s.reserved_bytes, 4 * granule);  // kept mapped: release threshold off by default
  CHECK_EQ(f.resource.idle_bytes(), 3 * granule);
  CHECK_EQ(s.largest_free_block, static_cast<std::int64_t>(4 * granule - 1024));

  void* c = f.resource.allocate(200 * KiB);  // the same place again, no new granule
  CHECK_EQ(c, b);
  CHECK_EQ(f.resource.stats().upstream_alloc_count, 2u);
  f.resource.deallocate(c, 200 * KiB);
  f.resource.deallocate(a, 1000);
  CHECK_EQ(f.resource.idle_bytes(), 4 * granule);
}

TEST_CASE("one run per stretch of unmapped granules") {
  fixture f;
  void* a = f.resource.allocate(10 * granule);  // ten granules into empty space: one map
  resource_stats s = f.resource.stats();
  CHECK_EQ(s.upstream_alloc_count, 1u);
  CHECK_EQ(s.segment_count, 1u);
  CHECK_EQ(s.reserved_bytes, 10 * granule);
  std::memset(a, 1, 10 * granule);
  void* b = f.resource.allocate(granule);      // granule 10
  void* c = f.resource.allocate(3 * granule);  // granules 11..13
  f.resource.deallocate(a, 10 * granule);
  f.resource.deallocate(c, 3 * granule);
  f.resource.trim(0);  // a's and c's runs go whole; b's stays
  s = f.resource.stats();
  CHECK_EQ(s.reserved_bytes, granule);
  CHECK_EQ(s.upstream_free_count, 2u);
  f.resource.deallocate(b, granule);  // b's run is idle but stays mapped (no trim)
  // 14 granules from the start: two unmapped stretches around b's granule, one run (one call
  // sequence) each.
  void* whole = f.resource.allocate(14 * granule);
  CHECK_EQ(whole, a);
  s = f.resource.stats();
  CHECK_EQ(s.upstream_alloc_count, 5u);  // a, b, c, then the two stretches
  CHECK_EQ(s.segment_count, 3u);
  CHECK_EQ(s.reserved_bytes, 14 * granule);
  std::memset(whole, 2, 14 * granule);
  f.resource.deallocate(whole, 14 * granule);
  f.resource.trim(0);
  CHECK_EQ(f.resource.stats().reserved_bytes, 0u);
  CHECK_EQ(f.resource.stats().segment_count, 0u);
}

TEST_CASE("trim unmaps idle runs and keeps those in use") {
  fixture f;
  void* a = f.resource.allocate(granule);          // granule 0
  void* b = f.resource.allocate(4 * granule);      // granules 1..4: one run
  void* c = f.resource.allocate(granule / 2);      // granule 5
  f.resource.deallocate(b, 4 * granule);
  CHECK_EQ(f.resource.stats().reserved_bytes, 6 * granule);

  f.resource.trim(5 * granule);  // keeps 5: b's run goes, whole (its granules cannot go one by one)
  CHECK_EQ(f.resource.stats().reserved_bytes, 2 * granule);
  f.resource.trim(0);  // nothing else is idle: a's and c's stay
  resource_stats s = f.resource.stats();
  CHECK_EQ(s.reserved_bytes, 2 * granule);
  CHECK_EQ(s.upstream_free_count, 1u);
  CHECK_EQ(s.largest_free_block, static_cast<std::int64_t>(granule / 2));  // the rest of c's granule
  std::memset(a, 1, granule);
  std::memset(c, 2, granule / 2);

  // The hole spans unmapped granules now: using it maps them again.
  void* d = f.resource.allocate(3 * granule);
  CHECK_EQ(d, b);
  CHECK_EQ(f.resource.stats().reserved_bytes, 5 * granule);
  std::memset(d, 3, 3 * granule);
  f.resource.deallocate(d, 3 * granule);
  f.resource.deallocate(a, granule);
  f.resource.deallocate(c, granule / 2);
  f.resource.trim(0);
  s = f.resource.stats();
  CHECK_EQ(s.reserved_bytes, 0u);
  CHECK_EQ(s.segment_count, 0u);
  CHECK_EQ(s.upstream_alloc_count, s.upstream_free_count);
}

TEST_CASE("split and coalesce across granule boundaries") {
  fixture f;
  // Three blocks straddling granule boundaries: 40 KiB, 100 KiB, 60 KiB.
  void* a = f.resource.allocate(40 * KiB);
  void* b = f.resource.allocate(100 * KiB);
  void* c = f.resource.allocate(60 * KiB);
  CHECK_EQ(addr(b), addr(a) + 40 * KiB);
  CHECK_EQ(addr(c), addr(b) + 100 * KiB);
  // 200 KiB over 64 KiB granules, in three runs: a's granule 0, b's 1..2, c's 3.
  CHECK_EQ(f.resource.stats().segment_count, 3u);
  CHECK_EQ(f.resource.stats().reserved_bytes, 4 * granule);

  f.resource.deallocate(b, 100 * KiB);
  // b's middle granule (64..128 KiB) is touched by b only: idle now; its edges are shared with a and c.
  CHECK_EQ(f.resource.idle_bytes(), granule);
  f.resource.trim(0);  // b's run (granules 1..2) shares granule 2 with c: it stays mapped whole
  CHECK_EQ(f.resource.stats().segment_count, 3u);
  CHECK_EQ(f.resource.stats().reserved_bytes, 4 * granule);
  // The largest mapped free run: b's hole, all still mapped.
  CHECK_EQ(f.resource.stats().largest_free_block, static_cast<std::int64_t>(100 * KiB));

  f.resource.deallocate(c, 60 * KiB);
  f.resource.trim(0);  // now b's and c's runs are idle: they go; a's stays
  CHECK_EQ(f.resource.stats().segment_count, 1u);
  CHECK_EQ(f.resource.stats().largest_free_block, static_cast<std::int64_t>(24 * KiB));  // the rest of granule 0

  f.resource.deallocate(a, 40 * KiB);
  // All three merged with the free tail: one block from the range's start again.
  void* whole = f.resource.allocate(300 * KiB);
  CHECK_EQ(whole, a);
  CHECK_EQ(f.resource.stats().segment_count, 2u);  // 300 KiB: a's granule 0, then 1..4 as one run
  std::memset(whole, 7, 300 * KiB);
  f.resource.deallocate(whole, 300 * KiB);
}

TEST_CASE("release threshold unmaps idle runs at free") {
  expandable_options o = fixture::small_range();
  o.release_threshold = 2 * granule;
  fixture f(o);
  void* a = f.resource.allocate(2 * granule);  // a run of 2
  void* b = f.resource.allocate(6 * granule);  // a run of 6
  CHECK_EQ(f.resource.stats().reserved_bytes, 8 * granule);
  f.resource.deallocate(a, 2 * granule);  // 2 idle: within the threshold, kept
  CHECK_EQ(f.resource.stats().reserved_bytes, 8 * granule);
  f.resource.deallocate(b, 6 * granule);  // 8 idle: b's run goes, the highest
  CHECK_EQ(f.resource.idle_bytes(), 2 * granule);
  CHECK_EQ(f.resource.stats().reserved_bytes, 2 * granule);
  CHECK_EQ(f.resource.stats().upstream_free_count, 1u);
  // Unmapping waited for the range's stream first (an event recorded and waited for on the host).
  CHECK(f.log->synchronizes >= 1u);
  CHECK_EQ(f.log->unreleased(), 0u);

  o.release_threshold = 0;
  fixture zero(o);
  void* z = zero.resource.allocate(3 * granule);
  zero.resource.deallocate(z, 3 * granule);
  CHECK_EQ(zero.resource.stats().reserved_bytes, 0u);
}

// Each cycle keeps a 48 MiB block and allocates then frees a temporary of 128 MiB + 4 MiB k (here
// at 1/16 scale, granule included, so that the pool's side stays small under the sanitizers). A
// segment pool carves every kept block from the last temporary's segment and needs a new segment for
// the next, larger temporary; one growing range keeps reserved at the peak in use.
TEST_CASE("cycle pattern reserves what is allocated") {
  constexpr std::size_t scale = 16;
  expandable_options o;
  o.reserve_bytes = 1ull << 30;
  expandable_resource expandable(make_host_vmm(2 * MiB / scale), o);
  host_resource host;
  pool_options scaled;  // the pool's segment policy at the same scale
  scaled.small_request_limit = 1 * MiB / scale;
  scaled.small_segment_bytes = 2 * MiB / scale;
  scaled.large_segment_rounding = 2 * MiB / scale;
  pool_resource pool(host, scaled);
  for (memory_resource* r : {static_cast<memory_resource*>(&expandable), static_cast<memory_resource*>(&pool)}) {
    std::vector<void*> kept;
    for (std::size_t k = 0; k < 100; ++k) {
      kept.push_back(r->allocate(48 * MiB / scale));
      const std::size_t temporary = (128 * MiB + 4 * MiB * k) / scale;
      r->deallocate(r->allocate(temporary), temporary);
    }
    const resource_stats s = r->stats();
    const double ratio = static_cast<double>(s.peak_reserved_bytes) / static_cast<double>(s.peak_allocated_bytes);
    MESSAGE((r == &pool ? "pool" : "expandable") << ": peak reserved / peak allocated = " << ratio);
    if (r == &expandable) {
      CHECK(ratio <= 1.02);
      // The granules of the peak, all still mapped: the first kept block's run, then one run per
      // temporary (each reaches past the last one's end).
      CHECK_EQ(s.reserved_bytes, std::uint64_t{(48 * 100 + 128 + 4 * 99) / 2} * (2 * MiB / scale));
      CHECK_EQ(s.segment_count, 101u);
      CHECK_EQ(s.upstream_alloc_count, 101u);
    } else {
      CHECK(ratio > 3.0);
    }
    for (void* p : kept) r->deallocate(p, 48 * MiB / scale);
  }
}

// Random allocations, frees (the last one often, and its size again at once: the cached block's
// path) and trims: after every call the idle bytes are the mapped bytes of the granules no live block
// touches, and every live block is mapped (written at both ends).
TEST_CASE("idle bytes are the mapped granules no block touches") {
  for (std::uint64_t threshold : {~std::uint64_t{0}, std::uint64_t{2 * granule}}) {
    expandable_options o = fixture::small_range();
    o.release_threshold = threshold;
    fixture f(o);
    struct live_block {
      void* p;
      std::size_t bytes;
    };
    std::vector<live_block> live;
    std::uint64_t x = 0x2545F4914F6CDD1Dull;
    auto next = [&x](std::uint64_t n) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      return x % n;
    };
    auto check = [&] {
      std::set<std::uintptr_t> busy;  // granule numbers (ranges are granule-aligned)
      for (const live_block& b : live) {
        const std::size_t rounded = (b.bytes + 511) / 512 * 512;
        for (std::uintptr_t g = addr(b.p) / granule; g <= (addr(b.p) + rounded - 1) / granule; ++g) busy.insert(g);
      }
      CHECK_EQ(f.resource.idle_bytes(), f.resource.stats().reserved_bytes - busy.size() * granule);
    };
    for (int step = 0; step < 3000; ++step) {
      const std::uint64_t op = next(10);
      if (op < 5 || live.empty()) {
        const std::size_t bytes = next(2) == 0 ? 1 + next(8 * KiB) : 1 + next(3 * granule);
        void* p = f.resource.allocate(bytes);
        static_cast<char*>(p)[0] = 1;
        static_cast<char*>(p)[bytes - 1] = 1;
        live.push_back({p, bytes});
      } else if (op < 9) {
        const std::size_t i = next(4) == 0 ? next(live.size()) : live.size() - 1;
        const live_block b = live[i];
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
        f.resource.deallocate(b.p, b.bytes);
        if (next(2) == 0) {
          check();
          void* p = f.resource.allocate(b.bytes);
          static_cast<char*>(p)[b.bytes - 1] = 1;
          live.push_back({p, b.bytes});
        }
      } else {
        f.resource.trim(next(f.resource.stats().reserved_bytes + 1));
      }
      check();
    }
    for (const live_block& b : live) f.resource.deallocate(b.p, b.bytes);
    CHECK_EQ(f.resource.idle_bytes(), f.resource.stats().reserved_bytes);
  }
}

TEST_CASE("gc threshold unmaps idle runs before growing past it") {
  expandable_options o = fixture::small_range();
  o.capacity_bytes = 16 * granule;
  o.gc_threshold = 0.5;  // 8 granules
  fixture f(o);
  void* keep = f.resource.allocate(granule, stream_a);
  void* a = f.resource.allocate(6 * granule, stream_a);
  f.resource.deallocate(a, 6 * granule, stream_a);  // 6 idle granules
  CHECK_EQ(f.resource.stats().reserved_bytes, 7 * granule);
  // 4 granules on B would take reserved to 11: idle runs go first, until the 4 fit under 8. a's run
  // goes whole: 1 + 4 mapped.
  void* b = f.resource.allocate(4 * granule, stream_b);
  resource_stats s = f.resource.stats();
  CHECK_EQ(s.upstream_free_count, 1u);
  CHECK_EQ(s.reserved_bytes, 5 * granule);
  CHECK_EQ(s.oom_count, 0u);
  f.resource.deallocate(b, 4 * granule, stream_b);
  f.resource.deallocate(keep, granule, stream_a);
}

// A request that fits no free block goes past the blocks in use; the idle granules of a hole it does
// not fit would stay mapped beside the new ones at a new peak (the variable-length transformer's
// 1.08x). They are unmapped first, the stream that used them synchronised, unless
// unmap_idle_before_growth is off.
TEST_CASE("idle runs are unmapped before reserved passes its peak") {
  for (bool unmap_first : {true, false}) {
    expandable_options o = fixture::small_range();
    o.unmap_idle_before_growth = unmap_first;
    fixture f(o);
    void* hole = f.resource.allocate(8 * granule);  // granules 0..7, one run
    void* kept = f.resource.allocate(granule);      // granule 8: the peak is 9 granules
    f.resource.deallocate(hole, 8 * granule);       // 8 idle granules below a block in use
    const std::size_t synchronizes = f.log->synchronizes;
    void* big = f.resource.allocate(12 * granule);  // fits only past `kept`: granules 9..20
    CHECK_EQ(addr(big), addr(kept) + granule);
    std::memset(big, 0x5A, 12 * granule);  // mapped: writable
    const resource_stats s = f.resource.stats();
    if (unmap_first) {
      CHECK_EQ(s.reserved_bytes, 13 * granule);  // not 21: the hole's run went first
      CHECK_EQ(s.upstream_free_count, 1u);
      CHECK_EQ(f.resource.idle_bytes(), 0u);
      CHECK(f.log->synchronizes > synchronizes);  // its stream, before unmapping
    } else {
      CHECK_EQ(s.reserved_bytes, 21 * granule);
      CHECK_EQ(s.upstream_free_count, 0u);
      CHECK_EQ(f.resource.idle_bytes(), 8 * granule);
      CHECK_EQ(f.log->synchronizes, synchronizes);
    }
    // The hole serves a request it fits, mapped again where it was unmapped.
    void* again = f.resource.allocate(8 * granule);
    CHECK_EQ(again, hole);
    std::memset(again, 0x3C, 8 * granule);
    CHECK_EQ(f.resource.stats().reserved_bytes, 21 * granule);
    f.resource.deallocate(again, 8 * granule);
    f.resource.deallocate(big, 12 * granule);
    f.resource.deallocate(kept, granule);
  }
}

// Below the peak of reserved (since reset_peak), a map keeps the idle runs (no synchronisation);
// past it, every stream's idle runs go first, the highest first, until the new granules fit under it.
TEST_CASE("idle runs of every stream go only past the peak") {
  expandable_options o = fixture::small_range();
  o.unmap_idle_before_growth = true;  // off by default
  fixture f(o);
  void* x = f.resource.allocate(4 * granule, stream_a);  // run 0..3
  void* y = f.resource.allocate(4 * granule, stream_a);  // run 4..7
  void* k = f.resource.allocate(granule, stream_a);      // run 8: the peak is 9 granules
  f.resource.deallocate(x, 4 * granule, stream_a);
  f.resource.deallocate(y, 4 * granule, stream_a);
  f.resource.trim(5 * granule);  // y's run goes: 5 mapped, x's 4 idle
  CHECK_EQ(f.resource.stats().reserved_bytes, 5 * granule);
  CHECK_EQ(f.resource.stats().upstream_free_count, 1u);
  const std::size_t synchronizes = f.log->synchronizes;

  void* b1 = f.resource.allocate(granule, stream_b);  // 6 mapped, under the peak: x's run stays
  CHECK_EQ(f.resource.stats().reserved_bytes, 6 * granule);
  CHECK_EQ(f.resource.stats().upstream_free_count, 1u);
  CHECK_EQ(f.resource.idle_bytes(), 4 * granule);
  CHECK_EQ(f.log->synchronizes, synchronizes);

  void* b2 = f.resource.allocate(4 * granule, stream_b);  // 10 would pass 9: stream A's idle run goes
  resource_stats s = f.resource.stats();
  CHECK_EQ(s.reserved_bytes, 6 * granule);
  CHECK_EQ(s.upstream_free_count, 2u);
  CHECK_EQ(s.peak_reserved_bytes, 9 * granule);
  CHECK_EQ(f.resource.idle_bytes(), 0u);
  CHECK_EQ(f.resource.range_count(), 2u);
  f.resource.deallocate(b2, 4 * granule, stream_b);
  f.resource.deallocate(b1, granule, stream_b);
  f.resource.deallocate(k, granule, stream_a);
}

TEST_CASE("bad options are rejected by name") {
  auto rejects = [](auto make, const char* argument) {
    try {
      make();
    } catch (const invalid_argument& e) {
      CHECK_EQ(e.argument(), std::string(argument));
      return;
    }
    CHECK(false);
  };
  rejects([] { return make_host_vmm(3 * MiB); }, "granuleBytes");  // not a power of two
  rejects([] { return make_host_vmm(512); }, "granuleBytes");      // below the page size
  rejects([] {
    expandable_options o;
    o.reserve_bytes = 3 * MiB;  // not a multiple of 2 MiB
    return expandable_resource(make_host_vmm(), o).granule_bytes();
  }, "reserveBytes");
  rejects([] {
    expandable_options o;
    o.gc_threshold = 1.5;
    return expandable_resource(make_host_vmm(), o).granule_bytes();
  }, "gcThreshold");
  rejects([] {
    expandable_options o;
    o.gc_threshold = -0.1;
    return expandable_resource(make_host_vmm(), o).granule_bytes();
  }, "gcThreshold");
  rejects([] {
    expandable_options o;
    o.reserve_bytes = std::uint64_t{1} << 40;  // 2^28 granules of 4 KiB: past the 2^24 a range may have
    return expandable_resource(make_host_vmm(4 * KiB), o).granule_bytes();
  }, "reserveBytes");
}

TEST_CASE("bad calls change nothing") {
  fixture f;
  void* a = f.resource.allocate(5000);
  const resource_stats before = f.resource.stats();
  int on_stack = 0;
  CHECK_THROWS_AS(f.resource.deallocate(&on_stack, 4), invalid_argument);
  CHECK_THROWS_AS(f.resource.deallocate(a, 4999), invalid_argument);
  CHECK_THROWS_AS(f.resource.allocate(0), invalid_argument);
  CHECK_THROWS_AS(f.resource.record_stream(&on_stack, stream_a), invalid_argument);
  CHECK_EQ(f.resource.stats().allocated_bytes, before.allocated_bytes);
  CHECK_EQ(f.resource.stats().reserved_bytes, before.reserved_bytes);
  CHECK_EQ(f.resource.allocation_size(a), 5000u);
  CHECK_EQ(f.resource.prefetch(a, 5000, placement::device), false);
  f.resource.deallocate(a, 5000);
  CHECK_THROWS_AS(f.resource.deallocate(a, 5000), invalid_argument);  // double free
  CHECK_EQ(f.resource.stats().free_count, 1u);
}
