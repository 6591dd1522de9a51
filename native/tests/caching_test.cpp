// caching_resource (the twin of PyTorch's CUDACachingAllocator) over host memory: rounding, pool
// choice, segment sizes, splitting, max_split_size, coalescing, free-and-retry under a limit,
// garbage collection, expandable segments and rejected options. The expected figures are those
// PyTorch's rules give (c10/cuda/CUDACachingAllocator.cpp).
#include <cstdint>
#include <cstring>
#include <vector>

#include <doctest/doctest.h>

#include "gpumem/caching_resource.hpp"
#include "gpumem/cuda_resource.hpp"
#include "gpumem/device.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/limiting_adaptor.hpp"
#include "gpumem/vmm.hpp"
#include "pool_test_support.hpp"

using namespace gpumem;
using namespace gpumem::test;

namespace {

caching_options expandable_options() {
  caching_options o;
  o.expandable_segments = true;
  o.expandable_address_space_bytes = 1024 * MiB;
  return o;
}

}  // namespace

TEST_CASE("round_size: 512 B minimum and multiples, and roundup_power2_divisions") {
  const std::vector<std::size_t> none;
  CHECK_EQ(caching_round_size(1, none), 512u);
  CHECK_EQ(caching_round_size(512, none), 512u);
  CHECK_EQ(caching_round_size(513, none), 1024u);
  CHECK_EQ(caching_round_size(MiB + 1, none), MiB + 512);

  const std::vector<std::size_t> four = parse_roundup_power2_divisions("4");
  CHECK_EQ(caching_round_size(1200, four), 1536u);   // not over 512 B * 4: plain rounding
  CHECK_EQ(caching_round_size(5000, four), 5120u);   // quarters of 4 KiB: 1 KiB steps
  CHECK_EQ(caching_round_size(MiB + 1, four), MiB + 256 * KiB);
  CHECK_EQ(caching_round_size(8 * MiB, four), 8 * MiB);  // a power of two stays
  CHECK_EQ(caching_round_size(9 * MiB, four), 10 * MiB);
}

TEST_CASE("roundup_power2_divisions per interval is read as PyTorch reads it") {
  const std::vector<std::size_t> d = parse_roundup_power2_divisions("[256:1,512:2,>:8]");
  REQUIRE_EQ(d.size(), 16u);
  CHECK_EQ(d[0], 1u);  // the first interval given sets every one below it
  CHECK_EQ(d[8], 1u);  // 256 MiB
  CHECK_EQ(d[9], 8u);  // '>' fills from the last interval given, that one included
  CHECK_EQ(d[15], 8u);
  const std::vector<std::size_t> spaced = parse_roundup_power2_divisions("[ 1:4 , 64:0 ]");
  CHECK_EQ(spaced[0], 4u);
  CHECK_EQ(spaced[6], 0u);
  CHECK_EQ(spaced[7], 0u);  // never set: no rounding there
  // 300 MiB + 1 in the 256 MiB interval (1 division): plain rounding
  CHECK_EQ(caching_round_size(300 * MiB + 1, d), 300 * MiB + 512);
  // 600 MiB in the 512 MiB interval (8 divisions): steps of 64 MiB
  CHECK_EQ(caching_round_size(600 * MiB, d), 640 * MiB);
}

TEST_CASE("requests up to 1 MiB share 2 MiB segments; larger ones get 20 MiB or their size in 2 MiB") {
  CHECK_EQ(caching_allocation_size(512), 2 * MiB);
  CHECK_EQ(caching_allocation_size(MiB), 2 * MiB);
  CHECK_EQ(caching_allocation_size(MiB + 512), 20 * MiB);
  CHECK_EQ(caching_allocation_size(10 * MiB - 512), 20 * MiB);
  CHECK_EQ(caching_allocation_size(10 * MiB), 10 * MiB);
  CHECK_EQ(caching_allocation_size(12 * MiB + 512), 14 * MiB);

  host_resource host;
  caching_resource cache(host);
  void* small = cache.allocate(MiB);
  CHECK_EQ(cache.stats().reserved_bytes, 2 * MiB);
  void* large = cache.allocate(MiB + 1);
  CHECK_EQ(cache.stats().reserved_bytes, 22 * MiB);
  void* big = cache.allocate(20 * MiB + 1);  // more than the 20 MiB segment's rest: 22 MiB of its own
  CHECK_EQ(cache.stats().reserved_bytes, 44 * MiB);
  CHECK_EQ(cache.stats().segment_count, 3u);
  // small and large never share a segment: a second small request takes the small segment's rest
  void* small2 = cache.allocate(600 * KiB);
  CHECK_EQ(addr(small2), addr(small) + MiB);
  CHECK_EQ(cache.stats().reserved_bytes, 44 * MiB);
  for (auto [p, n] : {std::pair{small, MiB}, {large, MiB + 1}, {big, 20 * MiB + 1}, {small2, 600 * KiB}}) {
    cache.deallocate(p, n);
  }
}

TEST_CASE("splitting: small blocks keep a rest of 512 B or more, large ones only a rest over 1 MiB") {
  host_resource host;
  caching_resource cache(host);
  void* a = cache.allocate(2 * MiB - 512);  // large (over 1 MiB): a 20 MiB segment, split
  CHECK_EQ(cache.stats().largest_free_block, static_cast<std::int64_t>(18 * MiB + 512));
  void* b = cache.allocate(19 * MiB);  // the 18 MiB rest does not fit: a segment of its own (20 MiB)
  CHECK_EQ(cache.stats().reserved_bytes, 40 * MiB);
  // the rest of b's segment is 1 MiB, not over 1 MiB: not split, b holds the whole segment
  CHECK_EQ(cache.stats().largest_free_block, static_cast<std::int64_t>(18 * MiB + 512));
  cache.deallocate(b, 19 * MiB);
  CHECK_EQ(cache.stats().largest_free_block, static_cast<std::int64_t>(20 * MiB));

  void* s1 = cache.allocate(2 * MiB - 1024 - 512);  // still large
  cache.deallocate(s1, 2 * MiB - 1024 - 512);
  void* t1 = cache.allocate(MiB - 512);  // small: a 2 MiB segment, the rest (1 MiB + 512) split off
  void* t2 = cache.allocate(MiB);
  CHECK_EQ(addr(t2), addr(t1) + MiB - 512);
  CHECK_EQ(cache.stats().reserved_bytes, 42 * MiB);
  cache.deallocate(t1, MiB - 512);
  cache.deallocate(t2, MiB);
  cache.deallocate(a, 2 * MiB - 512);
}

TEST_CASE("freeing coalesces neighbours of a segment, and trim gives whole segments back") {
  host_resource host;
  caching_resource cache(host);
  void* a = cache.allocate(256 * KiB);
  void* b = cache.allocate(256 * KiB);
  void* c = cache.allocate(256 * KiB);
  CHECK_EQ(addr(b), addr(a) + 256 * KiB);
  cache.deallocate(a, 256 * KiB);
  cache.deallocate(c, 256 * KiB);
  CHECK_EQ(cache.stats().largest_free_block, static_cast<std::int64_t>(2 * MiB - 512 * KiB));
  cache.trim();  // the segment is split (b is live): nothing goes
  CHECK_EQ(cache.stats().reserved_bytes, 2 * MiB);
  cache.deallocate(b, 256 * KiB);
  CHECK_EQ(cache.stats().largest_free_block, static_cast<std::int64_t>(2 * MiB));
  cache.trim();
  CHECK_EQ(cache.stats().reserved_bytes, 0u);
  CHECK_EQ(host.stats().allocated_bytes, 0u);
}

TEST_CASE("best fit per stream: another stream's cached block is not used") {
  host_resource host;
  caching_resource cache(host);
  int s1 = 0;
  int s2 = 0;
  auto* one = reinterpret_cast<stream_handle>(&s1);
  auto* two = reinterpret_cast<stream_handle>(&s2);
  void* a = cache.allocate(12 * MiB, one);
  cache.deallocate(a, 12 * MiB, one);
  void* b = cache.allocate(12 * MiB, two);
  CHECK_EQ(cache.stats().reserved_bytes, 24 * MiB);
  void* c = cache.allocate(12 * MiB, one);
  CHECK_EQ(c, a);
  cache.deallocate(b, 12 * MiB, two);
  cache.deallocate(c, 12 * MiB, one);
}

TEST_CASE("max_split_size: oversize blocks are not split, nor given to small requests or much smaller ones") {
  host_resource host;
  caching_options o;
  o.max_split_size_bytes = 40 * MiB;
  caching_resource cache(host, o);
  void* a = cache.allocate(50 * MiB);
  cache.deallocate(a, 50 * MiB);
  void* b = cache.allocate(20 * MiB);  // under max_split_size: the 50 MiB block is not for it
  CHECK_EQ(cache.stats().reserved_bytes, 70 * MiB);
  void* c = cache.allocate(41 * MiB);  // 50 MiB < 41 + 20 MiB: reused whole, not split
  CHECK_EQ(c, a);
  CHECK_EQ(cache.stats().reserved_bytes, 70 * MiB);
  CHECK_EQ(cache.stats().largest_free_block, 0);
  cache.deallocate(c, 41 * MiB);
  void* d = cache.allocate(80 * MiB);
  cache.deallocate(d, 80 * MiB);
  void* e = cache.allocate(45 * MiB);  // the 50 MiB block is within 20 MiB; the 80 MiB one would not be
  CHECK_EQ(e, a);
  void* f = cache.allocate(42 * MiB);  // 80 MiB >= 42 + 20 MiB: a new segment
  CHECK_EQ(cache.stats().reserved_bytes, 192 * MiB);
  cache.deallocate(b, 20 * MiB);
  cache.deallocate(e, 45 * MiB);
  cache.deallocate(f, 42 * MiB);
}

TEST_CASE("under a limit: a failed segment frees the cached segments and retries, and fits") {
  host_resource host;
  limiting_adaptor limit(host, 50 * MiB);
  caching_resource cache(limit);
  void* a = cache.allocate(24 * MiB);
  cache.deallocate(a, 24 * MiB);
  void* b = cache.allocate(30 * MiB);  // 24 + 30 MiB > 50 MiB: release_cached_blocks, then it fits
  resource_stats s = cache.stats();
  CHECK_EQ(s.reserved_bytes, 30 * MiB);
  CHECK_EQ(s.upstream_free_count, 1u);
  CHECK_EQ(s.oom_count, 0u);
  // a split segment is not given back: its live piece keeps it, and the request fails
  void* small = cache.allocate(5 * MiB);  // a 20 MiB segment, 15 MiB of it cached
  CHECK_EQ(cache.stats().reserved_bytes, 50 * MiB);
  CHECK_THROWS_AS(cache.allocate(16 * MiB), out_of_memory);
  CHECK_EQ(cache.stats().oom_count, 1u);
  CHECK_EQ(cache.stats().reserved_bytes, 50 * MiB);
  cache.deallocate(small, 5 * MiB);
  void* fits = cache.allocate(16 * MiB);  // the whole 20 MiB segment is free now: it serves the request
  CHECK_EQ(fits, small);
  cache.deallocate(fits, 16 * MiB);
  cache.deallocate(b, 30 * MiB);
}

TEST_CASE("under a limit with max_split_size: oversize cached segments go first, the largest down") {
  host_resource host;
  limiting_adaptor limit(host, 150 * MiB);
  caching_options o;
  o.max_split_size_bytes = 40 * MiB;
  caching_resource cache(limit, o);
  void* x = cache.allocate(50 * MiB);
  void* y = cache.allocate(60 * MiB);
  void* z = cache.allocate(30 * MiB);
  cache.deallocate(x, 50 * MiB);
  cache.deallocate(y, 60 * MiB);
  cache.deallocate(z, 30 * MiB);
  void* live = cache.allocate(10 * MiB);  // takes the 30 MiB block (not oversize), split
  CHECK_EQ(cache.stats().reserved_bytes, 140 * MiB);
  void* big = cache.allocate(70 * MiB);  // 210 MiB > 150: release_available_cached_blocks frees 60 then 50
  resource_stats s = cache.stats();
  CHECK_EQ(s.reserved_bytes, 100 * MiB);  // the 30 MiB segment stays (release_cached_blocks was not needed)
  CHECK_EQ(s.upstream_free_count, 2u);
  cache.deallocate(live, 10 * MiB);
  cache.deallocate(big, 70 * MiB);
}

TEST_CASE("garbage_collection_threshold frees aged cached segments before a new one") {
  host_resource host;
  caching_options o;
  o.allowed_memory_bytes = 100 * MiB;
  o.garbage_collection_threshold = 0.5;
  caching_resource cache(host, o);
  void* a = cache.allocate(30 * MiB);
  void* b = cache.allocate(30 * MiB);
  cache.deallocate(a, 30 * MiB);
  cache.deallocate(b, 30 * MiB);
  void* c = cache.allocate(40 * MiB);  // 60 MiB reserved > 50 MiB: both cached segments go
  CHECK_EQ(cache.stats().reserved_bytes, 40 * MiB);
  CHECK_EQ(cache.stats().upstream_free_count, 2u);
  cache.deallocate(c, 40 * MiB);

  caching_options plain = o;
  plain.garbage_collection_threshold = 0;
  caching_resource keeps(host, plain);
  void* d = keeps.allocate(30 * MiB);
  void* e = keeps.allocate(30 * MiB);
  keeps.deallocate(d, 30 * MiB);
  keeps.deallocate(e, 30 * MiB);
  void* f = keeps.allocate(40 * MiB);
  CHECK_EQ(keeps.stats().reserved_bytes, 100 * MiB);
  // the allowed maximum is a cap: past it, the cache is released and the request retried
  void* g = keeps.allocate(50 * MiB);
  CHECK_EQ(keeps.stats().reserved_bytes, 90 * MiB);
  keeps.deallocate(f, 40 * MiB);
  keeps.deallocate(g, 50 * MiB);
}

TEST_CASE("expandable segments: one range per pool and stream, mapped in 2 MiB and 20 MiB pages") {
  caching_resource cache(make_host_vmm(2 * MiB), expandable_options());
  void* s = cache.allocate(MiB);
  CHECK_EQ(cache.stats().reserved_bytes, 2 * MiB);
  void* a = cache.allocate(5 * MiB);
  CHECK_EQ(cache.stats().reserved_bytes, 22 * MiB);
  void* b = cache.allocate(30 * MiB);  // grows the range after a: contiguous, 20 more MiB mapped
  CHECK_EQ(addr(b), addr(a) + 5 * MiB);
  CHECK_EQ(cache.stats().reserved_bytes, 42 * MiB);
  std::memset(b, 0x5a, 30 * MiB);  // the memory is there
  cache.deallocate(a, 5 * MiB);
  cache.trim();  // a's whole pages are unmapped; the page b shares stays
  CHECK_EQ(cache.stats().reserved_bytes, 42 * MiB);  // a's 5 MiB lie in the page b starts in
  cache.deallocate(b, 30 * MiB);
  cache.deallocate(s, MiB);
  cache.trim();
  CHECK_EQ(cache.stats().reserved_bytes, 0u);
  void* again = cache.allocate(25 * MiB);  // a fresh range: two pages
  CHECK_EQ(cache.stats().reserved_bytes, 40 * MiB);
  cache.deallocate(again, 25 * MiB);
}

TEST_CASE("expandable segments under a limit: pages of the cache are unmapped and the request retried") {
  caching_resource cache(make_limited_vmm(make_host_vmm(2 * MiB), 80 * MiB), expandable_options());
  void* a = cache.allocate(30 * MiB);  // two pages
  void* b = cache.allocate(5 * MiB);   // the rest of the second page
  cache.deallocate(a, 30 * MiB);
  CHECK_EQ(cache.stats().reserved_bytes, 40 * MiB);
  // 3 more pages past b would take 100 MiB: release_cached_blocks unmaps a's first whole page, and
  // the retry maps them
  void* c = cache.allocate(50 * MiB);
  CHECK_EQ(cache.stats().reserved_bytes, 80 * MiB);
  CHECK_EQ(cache.stats().oom_count, 0u);
  std::memset(c, 1, 50 * MiB);
  CHECK_THROWS_AS(cache.allocate(40 * MiB), out_of_memory);
  cache.deallocate(b, 5 * MiB);
  cache.deallocate(c, 50 * MiB);
}

TEST_CASE("bad options and bad calls get typed errors") {
  host_resource host;
  caching_options small_split;
  small_split.max_split_size_bytes = 10 * MiB;
  CHECK_THROWS_AS(caching_resource(host, small_split), invalid_argument);
  caching_options gc;
  gc.garbage_collection_threshold = 1.5;
  CHECK_THROWS_AS(caching_resource(host, gc), invalid_argument);
  for (const char* text : {"3", "x", "[256:3]", "[255:2]", "[256:2", "[256-2]", "[256:2]x"}) {
    CAPTURE(text);
    CHECK_THROWS_AS(parse_roundup_power2_divisions(text), invalid_argument);
  }
  CHECK_THROWS_AS(caching_resource(host, expandable_options()), invalid_argument);
  CHECK_THROWS_AS(caching_resource(make_host_vmm(2 * MiB), caching_options{}), invalid_argument);

  caching_resource cache(host);
  void* p = cache.allocate(1000);
  CHECK_EQ(cache.allocation_size(p), 1000u);
  CHECK_THROWS_AS(cache.deallocate(p, 999), invalid_argument);
  int other = 0;
  CHECK_THROWS_AS(cache.deallocate(&other, 4), invalid_argument);
  cache.deallocate(p, 1000);
  CHECK_THROWS_AS(cache.deallocate(p, 1000), invalid_argument);
  CHECK_EQ(cache.stats().allocated_bytes, 0u);
}

// With a GPU (GPUMEM_CTEST_CUDA=ON on a GPU host): the same rules over cudaMalloc and over CUDA VMM
// pages, with data written through the blocks read back, and the release-and-retry under a limit
// giving real segments back with cudaFree. Without one the case says why and checks nothing more.
TEST_CASE("on a GPU: cudaMalloc segments and CUDA VMM pages, written and read back") {
  if (device_count() == 0) {
    MESSAGE("skipped: no CUDA device (" << device_status() << ")");
    CHECK(device_status() != "");
    return;
  }
  const stream_handle s = create_stream(0);
  std::vector<std::uint32_t> data(6 * MiB / 4), back(data.size());
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint32_t>(i * 2654435761u);
  {
    cuda_resource cuda(0);
    limiting_adaptor limit(cuda, 50 * MiB);
    caching_resource cache(limit);
    CHECK(cache.kind() == memory_kind::device);
    void* a = cache.allocate(24 * MiB, s);
    copy_to(a, memory_kind::device, data.data(), 6 * MiB, s);
    cache.deallocate(a, 24 * MiB, s);
    void* b = cache.allocate(30 * MiB, s);  // 54 MiB > 50: the cached 24 MiB segment goes to cudaFree
    CHECK_EQ(cache.stats().reserved_bytes, 30 * MiB);
    CHECK_EQ(cache.stats().upstream_free_count, 1u);
    copy_to(b, memory_kind::device, data.data(), 6 * MiB, s);
    copy_from(back.data(), b, memory_kind::device, 6 * MiB, s);
    CHECK(back == data);
    cache.deallocate(b, 30 * MiB, s);
    cache.trim();
    CHECK_EQ(cache.stats().reserved_bytes, 0u);
  }
  {
    caching_options o;
    o.expandable_segments = true;
    caching_resource cache(make_device_vmm(0, {"expandable", "upstream 'host'", 2 * MiB, {}, false}), o);
    void* a = cache.allocate(5 * MiB, s);
    void* b = cache.allocate(30 * MiB, s);  // grows a's range: one more 20 MiB page
    CHECK_EQ(reinterpret_cast<std::uintptr_t>(b), reinterpret_cast<std::uintptr_t>(a) + 5 * MiB);
    CHECK_EQ(cache.stats().reserved_bytes, 40 * MiB);
    // across the boundary of the two pages (at 20 MiB from a)
    void* across = static_cast<char*>(b) + 12 * MiB;
    copy_to(across, memory_kind::device, data.data(), 6 * MiB, s);
    copy_from(back.data(), across, memory_kind::device, 6 * MiB, s);
    CHECK(back == data);
    cache.deallocate(a, 5 * MiB, s);
    cache.deallocate(b, 30 * MiB, s);
    cache.trim();
    CHECK_EQ(cache.stats().reserved_bytes, 0u);
  }
  synchronize_stream(s);
  destroy_stream(s);
}
