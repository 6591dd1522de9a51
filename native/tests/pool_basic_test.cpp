// pool_resource on one stream over host memory: rounding, splitting, coalescing, best fit, the
// small/large split, steady state, trim, statistics and rejected input.
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include <doctest/doctest.h>

#include "gpumem/host_resource.hpp"
#include "gpumem/pool_resource.hpp"
#include "pool_test_support.hpp"

using namespace gpumem;
using namespace gpumem::test;

TEST_CASE("first small allocation creates one segment and the next is adjacent") {
  host_resource host;
  pool_resource pool(host);
  void* a = pool.allocate(1 * KiB);
  resource_stats s = pool.stats();
  CHECK_EQ(s.segment_count, 1u);
  CHECK_EQ(s.reserved_bytes, 2 * MiB);
  CHECK_EQ(s.upstream_alloc_count, 1u);
  CHECK_EQ(s.allocated_bytes, 1 * KiB);
  CHECK_EQ(s.largest_free_block, static_cast<std::int64_t>(2 * MiB - 1 * KiB));
  CHECK_EQ(host.stats().allocated_bytes, 2 * MiB);

  void* b = pool.allocate(700);  // rounds to 1 KiB as well
  CHECK_EQ(addr(b), addr(a) + 1 * KiB);
  s = pool.stats();
  CHECK_EQ(s.upstream_alloc_count, 1u);
  CHECK_EQ(s.allocated_bytes, 1 * KiB + 700);
  CHECK_EQ(s.largest_free_block, static_cast<std::int64_t>(2 * MiB - 2 * KiB));
  CHECK_EQ(pool.allocation_size(b), 700u);
  pool.deallocate(b, 700);
  pool.deallocate(a, 1 * KiB);
}

TEST_CASE("sizes round to 512 but allocated bytes count what was asked") {
  host_resource host;
  pool_resource pool(host);
  void* a = pool.allocate(1);
  void* b = pool.allocate(513);
  void* c = pool.allocate(512);
  CHECK_EQ(addr(b), addr(a) + 512);
  CHECK_EQ(addr(c), addr(b) + 1024);
  CHECK_EQ(pool.stats().allocated_bytes, 1u + 513u + 512u);
  CHECK_EQ(pool.allocation_size(a), 1u);
  CHECK_EQ(pool.allocation_size(b), 513u);
  CHECK_EQ(pool.allocation_size(static_cast<char*>(b) + 512), 0u);  // inside a block, not a start
  pool.deallocate(a, 1);
  CHECK_EQ(pool.allocation_size(a), 0u);
  pool.deallocate(b, 513);
  pool.deallocate(c, 512);
  CHECK_EQ(pool.stats().allocated_bytes, 0u);
}

TEST_CASE("freed neighbours coalesce") {
  host_resource host;
  pool_resource pool(host);
  void* a = pool.allocate(4 * KiB);
  void* b = pool.allocate(8 * KiB);
  void* c = pool.allocate(2 * KiB);
  REQUIRE_EQ(addr(b), addr(a) + 4 * KiB);
  REQUIRE_EQ(addr(c), addr(b) + 8 * KiB);
  pool.deallocate(a, 4 * KiB);
  pool.deallocate(b, 8 * KiB);
  // A and B merged into one 12 KiB block, the best fit for 12 KiB (the tail after C is larger).
  void* ab = pool.allocate(12 * KiB);
  CHECK_EQ(addr(ab), addr(a));
  CHECK_EQ(pool.stats().upstream_alloc_count, 1u);
  pool.deallocate(ab, 12 * KiB);
  pool.deallocate(c, 2 * KiB);
  resource_stats s = pool.stats();
  CHECK_EQ(s.largest_free_block, static_cast<std::int64_t>(2 * MiB));
  CHECK_EQ(s.segment_count, 1u);
  CHECK_EQ(s.allocated_bytes, 0u);
}

TEST_CASE("a freed block merges with both neighbours") {
  host_resource host;
  pool_resource pool(host);
  void* a = pool.allocate(4 * KiB);
  void* b = pool.allocate(4 * KiB);
  void* c = pool.allocate(4 * KiB);
  void* d = pool.allocate(4 * KiB);  // keeps the tail apart
  pool.deallocate(a, 4 * KiB);
  pool.deallocate(c, 4 * KiB);
  CHECK_EQ(pool.stats().largest_free_block, static_cast<std::int64_t>(2 * MiB - 16 * KiB));
  pool.deallocate(b, 4 * KiB);  // joins A and C
  void* abc = pool.allocate(12 * KiB);
  CHECK_EQ(addr(abc), addr(a));
  pool.deallocate(abc, 12 * KiB);
  pool.deallocate(d, 4 * KiB);
  CHECK_EQ(pool.stats().largest_free_block, static_cast<std::int64_t>(2 * MiB));
}

TEST_CASE("best fit takes the smallest block that fits") {
  host_resource host;
  pool_resource pool(host);
  void* f4 = pool.allocate(4 * KiB);
  void* sep1 = pool.allocate(512);
  void* f16 = pool.allocate(16 * KiB);
  void* sep2 = pool.allocate(512);
  void* f8 = pool.allocate(8 * KiB);
  void* sep3 = pool.allocate(512);
  pool.deallocate(f4, 4 * KiB);
  pool.deallocate(f16, 16 * KiB);
  pool.deallocate(f8, 8 * KiB);

  void* p = pool.allocate(6 * KiB);
  CHECK_EQ(addr(p), addr(f8));
  void* q = pool.allocate(4 * KiB);  // an exact fit wins over splitting the 16 KiB block
  CHECK_EQ(addr(q), addr(f4));
  void* r = pool.allocate(10 * KiB);
  CHECK_EQ(addr(r), addr(f16));
  void* t = pool.allocate(6 * KiB);  // what is left of the 16 KiB block
  CHECK_EQ(addr(t), addr(f16) + 10 * KiB);
  CHECK_EQ(pool.stats().upstream_alloc_count, 1u);
  for (auto [ptr, n] : std::vector<std::pair<void*, std::size_t>>{
           {p, 6 * KiB}, {q, 4 * KiB}, {r, 10 * KiB}, {t, 6 * KiB}, {sep1, 512}, {sep2, 512}, {sep3, 512}}) {
    pool.deallocate(ptr, n);
  }
  CHECK_EQ(pool.stats().largest_free_block, static_cast<std::int64_t>(2 * MiB));
}

TEST_CASE("best fit scans a size class for the exact fit and the lowest address") {
  // 32 KiB and 32.5 KiB share a size class; the list order must not decide.
  host_resource host;
  pool_resource pool(host);
  const std::size_t small = 32 * KiB;
  const std::size_t bigger = 32 * KiB + 512;
  void* x1 = pool.allocate(bigger);
  void* s1 = pool.allocate(512);
  void* x2 = pool.allocate(small);
  void* s2 = pool.allocate(512);
  void* x3 = pool.allocate(small);
  void* s3 = pool.allocate(512);
  pool.deallocate(x2, small);
  pool.deallocate(x3, small);  // freed after x2: x3 comes first in the class's list
  pool.deallocate(x1, bigger);
  void* p = pool.allocate(small);
  CHECK_EQ(addr(p), addr(x2));  // exact size, lower address than x3, though x1 was freed last
  void* q = pool.allocate(small + 1);
  CHECK_EQ(addr(q), addr(x1));  // only x1 fits
  void* r = pool.allocate(small);
  CHECK_EQ(addr(r), addr(x3));
  pool.deallocate(p, small);
  pool.deallocate(q, small + 1);
  pool.deallocate(r, small);
  pool.deallocate(s1, 512);
  pool.deallocate(s2, 512);
  pool.deallocate(s3, 512);
  CHECK_EQ(pool.stats().segment_count, 1u);
}

TEST_CASE("thousands of free blocks of one size are all reused") {
  // The search compares a bounded number of blocks per class; every hole must still be found.
  host_resource host;
  pool_resource pool(host);
  std::vector<void*> blocks;
  for (int i = 0; i < 4000; ++i) blocks.push_back(pool.allocate(512));
  std::set<std::uintptr_t> holes;
  for (int i = 0; i < 4000; i += 2) {
    pool.deallocate(blocks[i], 512);
    holes.insert(addr(blocks[i]));
  }
  for (int i = 0; i < 2000; ++i) {
    void* p = pool.allocate(300);
    CHECK_EQ(holes.erase(addr(p)), 1u);
    blocks[2 * i] = p;
  }
  CHECK(holes.empty());
  CHECK_EQ(pool.stats().segment_count, 1u);
  for (int i = 0; i < 4000; ++i) pool.deallocate(blocks[i], i % 2 == 0 ? 300 : 512);
  CHECK_EQ(pool.stats().largest_free_block, static_cast<std::int64_t>(2 * MiB));
}

TEST_CASE("a fitting block past the search bound is found before growing") {
  // Segments sized so that nothing but the blocks below is ever free: one 32.5 KiB block, then
  // 100 blocks of 32 KiB (the same size class, too small) in front of it in the class's list.
  host_resource host;
  pool_options options;
  options.small_segment_bytes = 32 * KiB + 512;
  options.small_request_limit = 32 * KiB + 512;
  pool_resource pool(host, options);
  void* fits = pool.allocate(32 * KiB + 512);
  std::vector<void*> too_small;
  std::vector<void*> separators;
  for (int i = 0; i < 100; ++i) {
    too_small.push_back(pool.allocate(32 * KiB));
    separators.push_back(pool.allocate(512));
  }
  pool.deallocate(fits, 32 * KiB + 512);
  for (void* p : too_small) pool.deallocate(p, 32 * KiB);
  const auto segments = pool.stats().upstream_alloc_count;
  void* again = pool.allocate(32 * KiB + 1);
  CHECK_EQ(addr(again), addr(fits));
  CHECK_EQ(pool.stats().upstream_alloc_count, segments);
  pool.deallocate(again, 32 * KiB + 1);
  for (void* p : separators) pool.deallocate(p, 512);
}

TEST_CASE("a split leaves even a 512 byte remainder free") {
  host_resource host;
  pool_resource pool(host);
  void* a = pool.allocate(4 * KiB + 512);
  void* sep = pool.allocate(512);
  pool.deallocate(a, 4 * KiB + 512);
  void* b = pool.allocate(4 * KiB);
  CHECK_EQ(addr(b), addr(a));
  CHECK_EQ(pool.stats().largest_free_block, static_cast<std::int64_t>(2 * MiB - 5 * KiB));
  void* c = pool.allocate(100);  // the 512-byte remainder is the best fit
  CHECK_EQ(addr(c), addr(a) + 4 * KiB);
  pool.deallocate(b, 4 * KiB);
  pool.deallocate(c, 100);
  pool.deallocate(sep, 512);
  CHECK_EQ(pool.stats().largest_free_block, static_cast<std::int64_t>(2 * MiB));
}

TEST_CASE("small and large requests never share a segment") {
  host_resource host;
  pool_resource pool(host);
  void* big = pool.allocate(2 * MiB + 512 * KiB);  // a 4 MiB large segment; 1.5 MiB stays free
  resource_stats s = pool.stats();
  CHECK_EQ(s.reserved_bytes, 4 * MiB);
  CHECK_EQ(s.largest_free_block, static_cast<std::int64_t>(1 * MiB + 512 * KiB));

  void* tiny = pool.allocate(1 * KiB);  // small: its own small segment, not the large remainder
  s = pool.stats();
  CHECK_EQ(s.segment_count, 2u);
  CHECK_EQ(s.reserved_bytes, 6 * MiB);
  CHECK((addr(tiny) < addr(big) || addr(tiny) >= addr(big) + 4 * MiB));

  void* mid = pool.allocate(1 * MiB + 256 * KiB);  // large: the large remainder fits it
  CHECK_EQ(addr(mid), addr(big) + 2 * MiB + 512 * KiB);
  CHECK_EQ(pool.stats().upstream_alloc_count, 2u);

  // Exactly small_request_limit is still small: it shares the small segment.
  void* m1 = pool.allocate(1 * MiB - 1 * KiB);
  void* m2 = pool.allocate(1 * MiB);
  CHECK_EQ(pool.stats().segment_count, 2u);
  CHECK_EQ(addr(m1), addr(tiny) + 1 * KiB);
  CHECK_EQ(addr(m2), addr(tiny) + 1 * MiB);
  pool.deallocate(m1, 1 * MiB - 1 * KiB);
  pool.deallocate(m2, 1 * MiB);
  pool.deallocate(mid, 1 * MiB + 256 * KiB);
  pool.deallocate(tiny, 1 * KiB);
  pool.deallocate(big, 2 * MiB + 512 * KiB);
  CHECK_EQ(pool.stats().largest_free_block, static_cast<std::int64_t>(4 * MiB));
  pool.trim(0);
  CHECK_EQ(pool.stats().reserved_bytes, 0u);
}

TEST_CASE("large segments round up to large segment rounding") {
  host_resource host;
  pool_options options;
  options.large_segment_rounding = 4 * MiB;
  pool_resource pool(host, options);
  void* p = pool.allocate(5 * MiB);
  CHECK_EQ(pool.stats().reserved_bytes, 8 * MiB);
  void* q = pool.allocate(64 * MiB);
  CHECK_EQ(pool.stats().reserved_bytes, 72 * MiB);
  pool.deallocate(p, 5 * MiB);
  pool.deallocate(q, 64 * MiB);
}

TEST_CASE("options change the small limit and segment size") {
  host_resource host;
  pool_options options;
  options.small_request_limit = 16 * KiB;
  options.small_segment_bytes = 64 * KiB;
  options.large_segment_rounding = 128 * KiB;
  pool_resource pool(host, options);
  void* a = pool.allocate(16 * KiB);
  CHECK_EQ(pool.stats().reserved_bytes, 64 * KiB);
  void* b = pool.allocate(16 * KiB + 1);  // large
  CHECK_EQ(pool.stats().reserved_bytes, 64 * KiB + 128 * KiB);
  void* c = pool.allocate(100 * KiB);  // large: fits the large remainder
  CHECK_EQ(addr(c), addr(b) + 16 * KiB + 512);
  CHECK_EQ(pool.stats().segment_count, 2u);
  pool.deallocate(a, 16 * KiB);
  pool.deallocate(b, 16 * KiB + 1);
  pool.deallocate(c, 100 * KiB);

  // A small limit above the segment size: what does not fit a small segment is large.
  pool_options odd;
  odd.small_request_limit = 8 * MiB;
  pool_resource pool2(host, odd);
  void* d = pool2.allocate(3 * MiB);
  CHECK_EQ(pool2.stats().reserved_bytes, 4 * MiB);
  pool2.deallocate(d, 3 * MiB);
}

TEST_CASE("invalid options are rejected") {
  host_resource host;
  pool_options bad;
  bad.small_segment_bytes = 1000;
  CHECK_THROWS_AS(pool_resource(host, bad), invalid_argument);
  pool_options zero;
  zero.large_segment_rounding = 0;
  CHECK_THROWS_AS(pool_resource(host, zero), invalid_argument);
}

TEST_CASE("steady state makes no upstream calls after the first round") {
  host_resource host;
  pool_resource pool(host);
  const std::vector<std::size_t> pattern = {256,     3000,        70 * KiB,    1 * MiB,       100,
                                            5 * MiB, 1536 * KiB,  256 * KiB,   64 * MiB,      8 * KiB,
                                            512,     3 * MiB + 1, 999 * KiB,   12 * MiB + 7,  40 * KiB};
  std::vector<std::pair<void*, std::size_t>> survivors;  // every third block lives into the next round
  auto round = [&] {
    std::vector<std::pair<void*, std::size_t>> kept;
    std::vector<std::pair<void*, std::size_t>> now;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
      void* p = pool.allocate(pattern[i]);
      std::memset(p, static_cast<int>(i), 64 < pattern[i] ? 64 : pattern[i]);
      (i % 3 == 0 ? kept : now).emplace_back(p, pattern[i]);
      if (i == 2) {  // last round's survivors go early in this one
        for (auto [q, n] : survivors) pool.deallocate(q, n);
        survivors.clear();
      }
    }
    for (std::size_t i = now.size(); i-- > 0;) pool.deallocate(now[i].first, now[i].second);
    survivors = kept;
  };
  round();
  const resource_stats first = pool.stats();
  for (int i = 0; i < 200; ++i) round();
  const resource_stats later = pool.stats();
  CHECK_EQ(later.upstream_alloc_count, first.upstream_alloc_count);
  CHECK_EQ(later.upstream_free_count, 0u);
  CHECK_EQ(later.reserved_bytes, first.reserved_bytes);
  CHECK_EQ(later.alloc_count, 201 * pattern.size());
  for (auto [q, n] : survivors) pool.deallocate(q, n);
  CHECK_EQ(pool.stats().allocated_bytes, 0u);
}

TEST_CASE("trim gives back free segments") {
  host_resource host;
  pool_resource pool(host);
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(pool.allocate(1 * MiB));  // 4 small segments
  void* large = pool.allocate(6 * MiB);
  CHECK_EQ(pool.stats().reserved_bytes, 14 * MiB);
  for (void* p : blocks) pool.deallocate(p, 1 * MiB);

  pool.trim(5 * MiB);  // the live large segment alone is 6 MiB: every free one goes
  resource_stats s = pool.stats();
  CHECK_EQ(s.reserved_bytes, 6 * MiB);
  CHECK_EQ(s.segment_count, 1u);
  CHECK_EQ(s.upstream_free_count, 4u);
  CHECK_EQ(s.allocated_bytes, 6 * MiB);
  std::memset(large, 1, 6 * MiB);  // untouched by trim

  pool.deallocate(large, 6 * MiB);
  for (int i = 0; i < 8; ++i) blocks[i] = pool.allocate(1 * MiB);
  for (void* p : blocks) pool.deallocate(p, 1 * MiB);
  CHECK_EQ(pool.stats().reserved_bytes, 14 * MiB);
  pool.trim(9 * MiB);
  s = pool.stats();
  CHECK(s.reserved_bytes <= 9 * MiB);
  CHECK(s.reserved_bytes > 0u);  // stops once under the mark
  pool.trim(0);
  s = pool.stats();
  CHECK_EQ(s.reserved_bytes, 0u);
  CHECK_EQ(s.segment_count, 0u);
  CHECK_EQ(s.upstream_free_count, s.upstream_alloc_count);
  CHECK_EQ(s.largest_free_block, 0);
  CHECK_EQ(host.stats().allocated_bytes, 0u);

  void* again = pool.allocate(1000);  // still works after trimming to nothing
  CHECK_EQ(pool.stats().reserved_bytes, 2 * MiB);
  pool.deallocate(again, 1000);
}

TEST_CASE("statistics count calls and peaks") {
  host_resource host;
  pool_resource pool(host);
  resource_stats s = pool.stats();
  CHECK_EQ(s.largest_free_block, 0);
  CHECK_EQ(s.reserved_bytes, 0u);
  void* a = pool.allocate(3000);
  void* b = pool.allocate(5 * MiB);
  pool.deallocate(a, 3000);
  s = pool.stats();
  CHECK_EQ(s.alloc_count, 2u);
  CHECK_EQ(s.free_count, 1u);
  CHECK_EQ(s.allocated_bytes, 5 * MiB);
  CHECK_EQ(s.peak_allocated_bytes, 5 * MiB + 3000);
  CHECK_EQ(s.reserved_bytes, 8 * MiB);
  CHECK_EQ(s.peak_reserved_bytes, 8 * MiB);
  CHECK_EQ(s.oom_count, 0u);
  pool.reset_peak();
  s = pool.stats();
  CHECK_EQ(s.peak_allocated_bytes, 5 * MiB);
  pool.deallocate(b, 5 * MiB);
  pool.trim();
  pool.reset_peak();
  s = pool.stats();
  CHECK_EQ(s.peak_allocated_bytes, 0u);
  CHECK_EQ(s.peak_reserved_bytes, 0u);
}

// Host memory that pretends to be managed, and records the prefetches asked of it.
class prefetch_recorder final : public memory_resource {
 public:
  struct call {
    void* ptr;
    std::size_t bytes;
    placement to;
    stream_handle stream;
  };
  std::vector<call> calls;

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override { return host_.allocate(bytes, stream); }
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) override {
    host_.deallocate(ptr, bytes, stream);
  }
  bool do_prefetch(void* ptr, std::size_t bytes, placement to, stream_handle stream) override {
    calls.push_back({ptr, bytes, to, stream});
    return true;
  }
  resource_stats do_stats() const override { return host_.stats(); }
  void do_reset_peak() override { host_.reset_peak(); }
  std::size_t do_allocation_size(const void* ptr) const override { return host_.allocation_size(ptr); }
  memory_kind do_kind() const noexcept override { return memory_kind::managed; }
  int do_device() const noexcept override { return 3; }

  host_resource host_;
};

TEST_CASE("kind and device forward to the upstream") {
  host_resource host;
  pool_resource pool(host);
  CHECK(pool.kind() == memory_kind::host);
  CHECK_EQ(pool.device(), -1);
  CHECK_EQ(&pool.upstream(), static_cast<memory_resource*>(&host));
  CHECK_EQ(pool.options().small_segment_bytes, 2 * MiB);
  void* p = pool.allocate(4096);
  CHECK(!pool.prefetch(p, 4096, placement::device));  // host memory: nothing to move
  pool.deallocate(p, 4096);

  prefetch_recorder managed;
  pool_resource managed_pool(managed, {}, make_host_ordering());  // no CUDA events in a host test
  CHECK(managed_pool.kind() == memory_kind::managed);
  CHECK_EQ(managed_pool.device(), 3);
}

TEST_CASE("prefetch forwards the segment range that covers the block") {
  prefetch_recorder managed;
  pool_resource pool(managed, {}, make_host_ordering());
  const stream_handle stream = reinterpret_cast<stream_handle>(0x7);
  void* a = pool.allocate(10 * KiB, stream);
  void* b = pool.allocate(3000, stream);
  CHECK(pool.prefetch(b, 3000, placement::device, stream));
  REQUIRE_EQ(managed.calls.size(), 1u);
  CHECK_EQ(managed.calls[0].ptr, a);  // the segment's start, which the upstream knows
  CHECK_EQ(managed.calls[0].bytes, 10 * KiB + 3000);
  CHECK(managed.calls[0].to == placement::device);
  CHECK_EQ(managed.calls[0].stream, stream);
  CHECK(pool.prefetch(a, 100, placement::host, stream));
  CHECK_EQ(managed.calls[1].bytes, 100u);

  int on_stack = 0;
  CHECK_THROWS_AS(pool.prefetch(&on_stack, 4, placement::device), invalid_argument);
  CHECK_THROWS_AS(pool.prefetch(b, 3001, placement::device), invalid_argument);  // past the block
  CHECK_EQ(managed.calls.size(), 2u);
  pool.deallocate(a, 10 * KiB, stream);
  pool.deallocate(b, 3000, stream);
  CHECK_THROWS_AS(pool.prefetch(b, 3000, placement::device), invalid_argument);
}

TEST_CASE("bad deallocations throw and change nothing") {
  host_resource host;
  pool_resource pool(host);
  void* a = pool.allocate(1000);
  void* b = pool.allocate(3 * MiB);
  const resource_stats before = pool.stats();
  auto unchanged = [&] {
    const resource_stats now = pool.stats();
    CHECK_EQ(now.allocated_bytes, before.allocated_bytes);
    CHECK_EQ(now.reserved_bytes, before.reserved_bytes);
    CHECK_EQ(now.alloc_count, before.alloc_count);
    CHECK_EQ(now.free_count, before.free_count);
    CHECK_EQ(now.segment_count, before.segment_count);
    CHECK_EQ(now.largest_free_block, before.largest_free_block);
    CHECK_EQ(pool.allocation_size(a), 1000u);
    CHECK_EQ(pool.allocation_size(b), 3 * MiB);
  };

  int on_stack = 0;
  try {
    pool.deallocate(&on_stack, 4);
    CHECK(false);
  } catch (const invalid_argument& e) {
    CHECK(e.error_kind() == invalid_argument::kind::type);
    CHECK_EQ(e.argument(), std::string("ptr"));
  }
  unchanged();
  CHECK_THROWS_AS(pool.deallocate(nullptr, 4), invalid_argument);
  CHECK_THROWS_AS(pool.deallocate(static_cast<char*>(a) + 512, 488), invalid_argument);  // inside a block
  unchanged();

  try {
    pool.deallocate(a, 999);
    CHECK(false);
  } catch (const invalid_argument& e) {
    CHECK(e.error_kind() == invalid_argument::kind::range);
    CHECK_EQ(e.argument(), std::string("bytes"));
  }
  CHECK_THROWS_AS(pool.deallocate(b, 4 * MiB), invalid_argument);  // the segment's size, not the block's
  unchanged();

  CHECK_THROWS_AS(pool.allocate(0), invalid_argument);
  CHECK_THROWS_AS(pool.record_stream(&on_stack, nullptr), invalid_argument);
  unchanged();

  pool.deallocate(a, 1000);
  const resource_stats after_free = pool.stats();
  CHECK_THROWS_AS(pool.deallocate(a, 1000), invalid_argument);  // double free
  CHECK_THROWS_AS(pool.record_stream(a, nullptr), invalid_argument);  // no longer live
  const resource_stats after_double = pool.stats();
  CHECK_EQ(after_double.free_count, after_free.free_count);
  CHECK_EQ(after_double.allocated_bytes, 3 * MiB);
  CHECK_EQ(after_double.largest_free_block, after_free.largest_free_block);
  pool.deallocate(b, 3 * MiB);
  CHECK_EQ(pool.stats().allocated_bytes, 0u);
}

TEST_CASE("destructor gives every segment back") {
  host_resource host;
  {
    pool_resource pool(host);
    pool.allocate(100);  // leaked on purpose: the pool still returns its segment
    void* b = pool.allocate(7 * MiB);
    pool.deallocate(b, 7 * MiB);
    CHECK_EQ(host.stats().allocated_bytes, 10 * MiB);
  }
  const resource_stats s = host.stats();
  CHECK_EQ(s.allocated_bytes, 0u);
  CHECK_EQ(s.free_count, s.alloc_count);
}
