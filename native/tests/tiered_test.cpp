// tiered_resource on the host twin (memfd mappings): device first then the host when the device
// budget is spent, placement, prefetch both ways keeping the address and the contents, budgets and
// out-of-memory, the cache (reuse with no new physical allocation, release when a budget or the
// "driver" refuses, trim), stream order of reuse (with a fake ordering), bad pointers, the stats
// split, the chain builder and threads.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "byte_pattern.hpp"
#include "fake_ordering.hpp"
#include "gpumem/chain_builder.hpp"
#include "gpumem/pool_resource.hpp"
#include "gpumem/strategy_registry.hpp"
#include "gpumem/vmm.hpp"
#include "gpumem/tiered_resource.hpp"
#include "pool_test_support.hpp"
#include "tiered_test_support.hpp"

using namespace gpumem;
using namespace gpumem::test;

namespace {

// A resource over the twin (64 KiB granules, 4 on the device, 8 on the host) with a fake ordering.
struct fixture : tiered_fixture {
  explicit fixture(tiered_options options = budgets(4 * granule, 8 * granule), std::uint64_t device_capacity = UINT64_MAX)
      : tiered_fixture(options, device_capacity) {}
};

placement tier(const tiered_resource& r, const void* p) {
  auto t = r.tier_of(p);
  REQUIRE(t.has_value());
  return *t;
}

}  // namespace

TEST_CASE("device first then host when the device budget is spent") {
  fixture f;
  CHECK_EQ(f.resource.granule_bytes(), granule);
  CHECK_EQ(f.resource.device_budget_bytes(), 4 * granule);
  void* a = f.resource.allocate(3 * granule);  // device: 3 of 4 granules
  void* b = f.resource.allocate(1000);         // device: rounded to 1 granule, the budget is full
  void* c = f.resource.allocate(granule + 1);  // spills: 2 granules on the host
  CHECK(tier(f.resource, a) == placement::device);
  CHECK(tier(f.resource, b) == placement::device);
  CHECK(tier(f.resource, c) == placement::host);
  CHECK_EQ(addr(a) % granule, 0u);
  fill(a, 3 * granule, 1);
  fill(b, 1000, 2);
  fill(c, granule + 1, 3);
  CHECK(intact(a, 3 * granule, 1));
  CHECK(intact(c, granule + 1, 3));
  resource_stats s = f.resource.stats();
  CHECK_EQ(s.allocated_bytes, 3 * granule + 1000 + granule + 1);
  CHECK_EQ(s.reserved_bytes, 6 * granule);
  CHECK_EQ(s.host_allocated_bytes, static_cast<std::int64_t>(granule + 1));
  CHECK_EQ(s.host_reserved_bytes, static_cast<std::int64_t>(2 * granule));
  CHECK_EQ(s.peak_host_reserved_bytes, static_cast<std::int64_t>(2 * granule));
  CHECK_EQ(s.upstream_alloc_count, 3u);
  CHECK_EQ(s.segment_count, 3u);
  f.resource.deallocate(c, granule + 1);
  f.resource.deallocate(b, 1000);
  f.resource.deallocate(a, 3 * granule);
  s = f.resource.stats();
  CHECK_EQ(s.allocated_bytes, 0u);
  CHECK_EQ(s.host_allocated_bytes, 0);
  CHECK_EQ(s.peak_host_allocated_bytes, static_cast<std::int64_t>(granule + 1));
  CHECK_EQ(s.reserved_bytes, 6 * granule);  // cached
  CHECK_EQ(s.largest_free_block, static_cast<std::int64_t>(3 * granule));
  CHECK_EQ(f.resource.cached_blocks(), 3u);
}

TEST_CASE("placement device only and host only") {
  fixture f;
  f.resource.set_placement(placement_choice::host);
  CHECK(f.resource.current_placement() == placement_choice::host);
  void* h = f.resource.allocate(100);
  CHECK(tier(f.resource, h) == placement::host);  // with the device budget free
  f.resource.set_placement(placement_choice::device);
  void* d = f.resource.allocate(4 * granule);  // the whole device budget
  CHECK(tier(f.resource, d) == placement::device);
  try {
    f.resource.allocate(10);  // device only: no spill
    CHECK(false);
  } catch (const out_of_memory& e) {
    CHECK(std::string(e.what()).find("placement 'device'") != std::string::npos);
    CHECK(std::string(e.what()).find("device budget") != std::string::npos);
    CHECK_EQ(e.requested_bytes(), 10u);
    CHECK_EQ(e.stats().allocated_bytes, 4 * granule + 100);
  }
  f.resource.set_placement(placement_choice::automatic);
  void* spill = f.resource.allocate(10);
  CHECK(tier(f.resource, spill) == placement::host);
  f.resource.set_placement(placement_choice::host);
  CHECK_THROWS_AS(f.resource.allocate(7 * granule), out_of_memory);  // 2 of the 8 host granules are in use
  CHECK_EQ(f.resource.stats().oom_count, 2u);
  f.resource.deallocate(spill, 10);
  f.resource.deallocate(d, 4 * granule);
  f.resource.deallocate(h, 100);
  CHECK_EQ(parse_placement_choice("auto") == placement_choice::automatic, true);
  CHECK_THROWS_AS(parse_placement_choice("gpu"), invalid_argument);
  CHECK_EQ(std::string(placement_choice_name(placement_choice::host)), std::string("host"));
}

TEST_CASE("prefetch moves a block both ways keeping its address and contents") {
  fixture f;
  const std::size_t n = 2 * granule + 123;
  void* p = f.resource.allocate(n);
  CHECK(tier(f.resource, p) == placement::device);
  fill(p, n, 7);
  CHECK(f.resource.prefetch(p, n, placement::device));  // already there
  CHECK_EQ(f.memory->copies, 0u);

  CHECK(f.resource.prefetch(static_cast<char*>(p) + 100, 10, placement::host));  // a pointer inside the block
  CHECK(tier(f.resource, p) == placement::host);
  CHECK(intact(p, n, 7));  // same address, same bytes
  CHECK_EQ(f.memory->copies, 1u);
  CHECK_EQ(f.memory->synchronizes, 1u);
  resource_stats s = f.resource.stats();
  CHECK_EQ(s.bytes_moved_to_host, n);
  CHECK_EQ(s.host_allocated_bytes, static_cast<std::int64_t>(n));
  CHECK_EQ(s.host_reserved_bytes, static_cast<std::int64_t>(3 * granule));
  CHECK_EQ(s.reserved_bytes, 3 * granule);  // the device memory went back
  CHECK_EQ(s.upstream_alloc_count, 2u);
  CHECK_EQ(s.upstream_free_count, 1u);
  CHECK_EQ(f.resource.allocation_size(p), n);

  fill(p, n, 9);  // written on the host tier
  CHECK(f.resource.prefetch(p, n, placement::device));
  CHECK(tier(f.resource, p) == placement::device);
  CHECK(intact(p, n, 9));
  s = f.resource.stats();
  CHECK_EQ(s.bytes_moved_to_device, n);
  CHECK_EQ(s.host_allocated_bytes, 0);
  CHECK_EQ(s.host_reserved_bytes, 0);
  CHECK_EQ(s.peak_host_reserved_bytes, static_cast<std::int64_t>(3 * granule));
  f.resource.deallocate(p, n);
  CHECK_EQ(f.resource.stats().allocated_bytes, 0u);
}

TEST_CASE("prefetch returns false and changes nothing without room") {
  fixture f(budgets(2 * granule, 8 * granule));
  void* d = f.resource.allocate(2 * granule);  // fills the device budget
  void* h = f.resource.allocate(granule);       // spills
  fill(h, granule, 4);
  CHECK(tier(f.resource, h) == placement::host);
  const resource_stats before = f.resource.stats();
  CHECK(!f.resource.prefetch(h, granule, placement::device));  // the device budget has no room
  CHECK(tier(f.resource, h) == placement::host);
  CHECK(intact(h, granule, 4));
  CHECK_EQ(f.resource.stats().reserved_bytes, before.reserved_bytes);
  CHECK_EQ(f.resource.stats().upstream_alloc_count, before.upstream_alloc_count);
  f.resource.deallocate(d, 2 * granule);  // cached: released to make room
  CHECK(f.resource.prefetch(h, granule, placement::device));
  CHECK(tier(f.resource, h) == placement::device);
  CHECK(intact(h, granule, 4));
  CHECK_EQ(f.resource.stats().reserved_bytes, granule);
  f.resource.deallocate(h, granule);
}

TEST_CASE("out of memory past both budgets leaves the resource usable") {
  fixture f;
  void* a = f.resource.allocate(4 * granule);
  void* b = f.resource.allocate(8 * granule);
  try {
    f.resource.allocate(1);
    CHECK(false);
  } catch (const out_of_memory& e) {
    const std::string what = e.what();
    CHECK(what.find("device budget") != std::string::npos);
    CHECK(what.find("host budget") != std::string::npos);
    CHECK(what.find("(reserved") != std::string::npos);
    CHECK_EQ(e.stats().allocated_bytes, 12 * granule);
    CHECK_EQ(e.stats().host_allocated_bytes, static_cast<std::int64_t>(8 * granule));
  }
  CHECK_THROWS_AS(f.resource.allocate(SIZE_MAX), out_of_memory);
  CHECK_EQ(f.resource.stats().oom_count, 2u);
  f.resource.deallocate(b, 8 * granule);
  void* c = f.resource.allocate(granule);  // usable: the cached host block is released to make room
  CHECK(tier(f.resource, c) == placement::host);
  f.resource.deallocate(c, granule);
  f.resource.deallocate(a, 4 * granule);
  CHECK_EQ(f.resource.stats().allocated_bytes, 0u);
}

TEST_CASE("steady state reuses cached blocks with no new physical allocation") {
  fixture f;
  const std::size_t sizes[] = {1000, 2 * granule, granule + 5, 3 * granule};  // 1 + 2 + 2 on the device... spills
  std::vector<void*> first;
  for (std::size_t n : sizes) first.push_back(f.resource.allocate(n));
  std::vector<placement> tiers;
  for (void* p : first) tiers.push_back(tier(f.resource, p));
  for (std::size_t i = 0; i < 4; ++i) f.resource.deallocate(first[i], sizes[i]);
  const resource_stats warm = f.resource.stats();
  for (int epoch = 0; epoch < 5; ++epoch) {
    std::vector<void*> ps;
    for (std::size_t n : sizes) ps.push_back(f.resource.allocate(n));
    for (std::size_t i = 0; i < 4; ++i) {
      CHECK(tier(f.resource, ps[i]) == tiers[i]);
      fill(ps[i], sizes[i], static_cast<std::uint8_t>(i));
    }
    for (std::size_t i = 0; i < 4; ++i) f.resource.deallocate(ps[i], sizes[i]);
  }
  const resource_stats s = f.resource.stats();
  CHECK_EQ(s.upstream_alloc_count, warm.upstream_alloc_count);  // no driver call
  CHECK_EQ(s.upstream_free_count, 0u);
  CHECK_EQ(f.memory->creates, 4u);
  CHECK_EQ(s.reserved_bytes, warm.reserved_bytes);
  CHECK_EQ(s.alloc_count, 24u);
  CHECK_EQ(f.log->records, 0u);  // one stream: no event

  f.resource.trim();  // every cached block goes
  CHECK_EQ(f.resource.stats().reserved_bytes, 0u);
  CHECK_EQ(f.resource.stats().host_reserved_bytes, 0);
  CHECK_EQ(f.resource.stats().segment_count, 0u);
  CHECK_EQ(f.resource.stats().largest_free_block, 0);
  CHECK_EQ(f.resource.cached_blocks(), 0u);
  CHECK_EQ(f.memory->releases, 4u);
}

TEST_CASE("trim keeps live blocks and at most bytes to keep") {
  fixture f;
  void* live = f.resource.allocate(granule);
  fill(live, granule, 5);
  void* a = f.resource.allocate(granule);
  void* b = f.resource.allocate(2 * granule);
  f.resource.deallocate(a, granule);      // older
  f.resource.deallocate(b, 2 * granule);  // newer
  f.resource.trim(3 * granule);           // the oldest cached block goes (a)
  CHECK_EQ(f.resource.stats().reserved_bytes, 3 * granule);
  CHECK_EQ(f.resource.cached_blocks(), 1u);
  f.resource.trim();
  CHECK_EQ(f.resource.stats().reserved_bytes, granule);
  CHECK(intact(live, granule, 5));
  f.resource.deallocate(live, granule);
}

TEST_CASE("the cache never causes an out of memory") {
  // The budget refuses: cached device blocks of other sizes are released, oldest first, as far as needed.
  fixture f;
  std::vector<void*> ps;
  for (int i = 0; i < 4; ++i) ps.push_back(f.resource.allocate(granule));
  for (void* p : ps) f.resource.deallocate(p, granule);  // 4 device granules cached
  void* big = f.resource.allocate(2 * granule);
  CHECK(tier(f.resource, big) == placement::device);  // not spilled: two cached blocks made room
  CHECK_EQ(f.resource.cached_blocks(), 2u);
  CHECK_EQ(f.resource.stats().reserved_bytes, 4 * granule);
  f.resource.deallocate(big, 2 * granule);

  // The driver refuses: every cached block of the tier is released and the creation retried.
  fixture g(budgets(64 * granule, 8 * granule), 3 * granule);
  std::vector<void*> qs;
  for (int i = 0; i < 3; ++i) qs.push_back(g.resource.allocate(granule));
  for (void* q : qs) g.resource.deallocate(q, granule);
  void* two = g.resource.allocate(2 * granule);
  CHECK(tier(g.resource, two) == placement::device);
  CHECK_EQ(g.memory->refused, 1u);
  CHECK_EQ(g.resource.cached_blocks(), 0u);
  void* three = g.resource.allocate(2 * granule);  // the device is full for real: spills
  CHECK(tier(g.resource, three) == placement::host);
  g.resource.deallocate(three, 2 * granule);
  g.resource.deallocate(two, 2 * granule);
}

TEST_CASE("near the budget a larger cached block serves instead of being released") {
  // 4 device granules: a live block of 2 and a cached one of 2 fill the budget. A request of 1
  // granule takes the cached 2-granule block (no release, no new physical memory); a request of 2
  // later finds it cached again. Away from the budget a new block of the exact size is made.
  fixture f;
  void* live = f.resource.allocate(2 * granule);
  void* a = f.resource.allocate(2 * granule);
  f.resource.deallocate(a, 2 * granule);
  const std::size_t creates = f.memory->creates;
  void* small = f.resource.allocate(granule);
  CHECK_EQ(small, a);
  CHECK(tier(f.resource, small) == placement::device);
  CHECK_EQ(f.memory->creates, creates);
  CHECK_EQ(f.memory->releases, 0u);
  CHECK_EQ(f.resource.stats().allocated_bytes, 3 * granule);
  CHECK_EQ(f.resource.stats().reserved_bytes, 4 * granule);
  f.resource.deallocate(small, granule);
  void* again = f.resource.allocate(2 * granule);
  CHECK_EQ(again, a);
  CHECK_EQ(f.memory->creates, creates);
  f.resource.deallocate(again, 2 * granule);
  f.resource.deallocate(live, 2 * granule);

  fixture g;  // room in the budget: the exact size is made, the larger cached block stays
  void* b = g.resource.allocate(2 * granule);
  g.resource.deallocate(b, 2 * granule);
  void* exact = g.resource.allocate(granule);
  CHECK(exact != b);
  CHECK_EQ(g.resource.stats().reserved_bytes, 3 * granule);
  g.resource.deallocate(exact, granule);

  // More than 4 times the request: not taken; cached blocks are released to make room instead.
  fixture h(budgets(6 * granule, 8 * granule));
  void* one = h.resource.allocate(granule);
  void* five = h.resource.allocate(5 * granule);
  h.resource.deallocate(five, 5 * granule);
  void* other = h.resource.allocate(granule);
  CHECK(other != five);
  CHECK_EQ(h.memory->releases, 1u);
  h.resource.deallocate(other, granule);
  h.resource.deallocate(one, granule);
}

TEST_CASE("cross stream reuse waits on an event and same stream reuse does not") {
  fixture f;
  const stream_handle s1 = stream_key(0x100), s2 = stream_key(0x200), s3 = stream_key(0x300);
  void* p = f.resource.allocate(1000, s1);
  f.resource.deallocate(p, 1000, s1);
  void* q = f.resource.allocate(1000, s1);  // same stream: at once
  CHECK_EQ(q, p);
  CHECK_EQ(f.log->records, 0u);
  f.resource.deallocate(q, 1000, s1);
  void* r = f.resource.allocate(1000, s2);  // another stream: behind an event recorded on s1
  CHECK_EQ(r, p);
  CHECK_EQ(f.log->records_on(s1), 1u);
  CHECK_EQ(f.log->waits_on(s2), 1u);

  // record_stream: an event on s3 at free; the next taker waits on it too.
  f.resource.record_stream(r, s3);
  f.resource.deallocate(r, 1000, s2);
  CHECK_EQ(f.log->records_on(s3), 1u);
  void* t = f.resource.allocate(1000, s2);
  CHECK_EQ(t, p);
  CHECK_EQ(f.log->waits_on(s2), 2u);  // the record_stream event
  CHECK_EQ(f.log->unreleased(), 0u);
  f.resource.deallocate(t, 1000, s2);

  // A destroyed stream's freed blocks need no event any more.
  void* u = f.resource.allocate(1000, s3);
  CHECK_EQ(u, p);
  f.resource.deallocate(u, 1000, s3);
  const std::size_t records = f.log->records;
  f.log->destroy_stream(s3);
  void* v = f.resource.allocate(1000, s1);
  CHECK_EQ(v, p);
  CHECK_EQ(f.log->records, records);
  f.resource.deallocate(v, 1000, s1);
}

TEST_CASE("prefetch orders the copy after the streams the block was used on") {
  fixture f;
  const stream_handle s1 = stream_key(0x100), s2 = stream_key(0x200);
  void* p = f.resource.allocate(1000, s1);
  f.resource.record_stream(p, s2);
  CHECK(f.resource.prefetch(p, 1000, placement::host, nullptr));
  CHECK_EQ(f.log->records_on(s1), 1u);
  CHECK_EQ(f.log->records_on(s2), 1u);
  CHECK_EQ(f.log->waits_on(nullptr), 2u);
  f.resource.deallocate(p, 1000, s1);
}

TEST_CASE("bad pointers and sizes get typed errors and change nothing") {
  fixture f;
  void* p = f.resource.allocate(1000);
  const resource_stats before = f.resource.stats();
  auto kind_of = [](auto&& call) {
    try {
      call();
    } catch (const invalid_argument& e) {
      return e.error_kind() == invalid_argument::kind::type ? std::string("type:") + e.argument()
                                                           : std::string("range:") + e.argument();
    }
    return std::string("none");
  };
  char* inside = static_cast<char*>(p) + 256;
  CHECK_EQ(kind_of([&] { f.resource.deallocate(inside, 1000); }), std::string("type:ptr"));
  CHECK_EQ(kind_of([&] { f.resource.deallocate(p, 999); }), std::string("range:bytes"));
  CHECK_EQ(kind_of([&] { f.resource.deallocate(reinterpret_cast<void*>(0x1000), 8); }), std::string("type:ptr"));
  CHECK_EQ(kind_of([&] { f.resource.record_stream(inside, stream_key(9)); }), std::string("type:ptr"));
  CHECK_EQ(kind_of([&] { f.resource.prefetch(reinterpret_cast<void*>(0x1000), 8, placement::host); }), std::string("type:ptr"));
  CHECK_EQ(kind_of([&] { f.resource.prefetch(static_cast<char*>(p) + granule, 8, placement::host); }), std::string("type:ptr"));
  CHECK_EQ(kind_of([&] { f.resource.prefetch(p, granule + 1, placement::host); }), std::string("range:bytes"));
  CHECK_EQ(f.resource.allocation_size(inside), 0u);
  CHECK_EQ(f.resource.allocation_size(p), 1000u);
  CHECK(tier(f.resource, p) == placement::device);
  const resource_stats after = f.resource.stats();
  CHECK_EQ(after.allocated_bytes, before.allocated_bytes);
  CHECK_EQ(after.reserved_bytes, before.reserved_bytes);
  CHECK_EQ(after.free_count, before.free_count);
  f.resource.deallocate(p, 1000);
  CHECK_EQ(kind_of([&] { f.resource.deallocate(p, 1000); }), std::string("type:ptr"));  // double free
  CHECK_THROWS_AS(f.resource.allocate(0), invalid_argument);
}

TEST_CASE("reset peak sets the host peaks too") {
  fixture f(budgets(0, 8 * granule));  // device budget 0: everything on the host
  void* a = f.resource.allocate(2 * granule);
  void* b = f.resource.allocate(granule);
  CHECK(tier(f.resource, a) == placement::host);
  f.resource.deallocate(b, granule);
  f.resource.trim();
  resource_stats s = f.resource.stats();
  CHECK_EQ(s.peak_host_allocated_bytes, static_cast<std::int64_t>(3 * granule));
  CHECK_EQ(s.peak_host_reserved_bytes, static_cast<std::int64_t>(3 * granule));
  f.resource.reset_peak();
  s = f.resource.stats();
  CHECK_EQ(s.peak_host_allocated_bytes, static_cast<std::int64_t>(2 * granule));
  CHECK_EQ(s.peak_host_reserved_bytes, static_cast<std::int64_t>(2 * granule));
  CHECK_EQ(s.peak_allocated_bytes, 2 * granule);
  f.resource.deallocate(a, 2 * granule);
}

TEST_CASE("the host budget never passes what the host has") {
  tiered_options o;
  o.host_budget_bytes = UINT64_MAX;
  tiered_resource r(make_host_vmm(), o);
  CHECK(r.host_budget_bytes() < UINT64_MAX);  // capped by MemAvailable less 10% of MemTotal
  CHECK_EQ(r.device_budget_bytes(), std::uint64_t{1} << 30);  // the twin's default
  CHECK_EQ(r.granule_bytes(), 2 * MiB);
  CHECK(r.kind() == memory_kind::host);
  CHECK_EQ(r.device(), -1);
  tiered_options small;
  small.host_budget_bytes = 4 * MiB;
  tiered_resource s(make_host_vmm(), small);
  CHECK_EQ(s.host_budget_bytes(), 4 * MiB);
  CHECK_THROWS_AS(make_host_vmm(3 * MiB), invalid_argument);
}

TEST_CASE("chain builder builds tiered with the common layers") {
  chain_spec spec;
  spec.strategy = parse_strategy("tiered").name;
  CHECK_EQ(spec.strategy, std::string("tiered"));
  spec.options<tiered_spec>().backing = placement_choice::host;
  spec.options<tiered_spec>().options = budgets(4 * MiB, 64 * MiB);
  spec.limit_bytes = 32 * MiB;
  spec.tracking_capacity = 16;
  const std::vector<std::string> expected = {"tiered", "limit", "track"};
  CHECK(chain_layers(spec) == expected);
  resource_chain chain = build_chain(spec);
  REQUIRE(chain.placer != nullptr);
  auto* tiered = dynamic_cast<tiered_resource*>(chain.placer);
  REQUIRE(tiered != nullptr);
  memory_resource& top = chain.top();
  void* a = top.allocate(3 * MiB);
  void* b = top.allocate(3 * MiB);  // past the 4 MiB device budget: the host
  CHECK(tiered->tier_of(a) == placement::device);
  CHECK(tiered->tier_of(b) == placement::host);
  tiered->set_placement(placement_choice::host);
  void* c = top.allocate(1000);
  CHECK(tiered->tier_of(c) == placement::host);
  resource_stats s = top.stats();  // the host part passes through the adaptors
  CHECK_EQ(s.host_allocated_bytes, static_cast<std::int64_t>(3 * MiB + 1000));
  CHECK(top.prefetch(b, 3 * MiB, placement::device) == false);  // the device budget is spent
  CHECK(top.prefetch(a, 3 * MiB, placement::host));
  CHECK_EQ(top.stats().bytes_moved_to_host, 3 * MiB);
  CHECK_THROWS_AS(top.allocate(30 * MiB), out_of_memory);  // the limit
  top.deallocate(a, 3 * MiB);
  top.deallocate(b, 3 * MiB);
  top.deallocate(c, 1000);

  chain_spec plain;
  plain.strategy = "pool";
  plain.options<pool_spec>().upstream = placement::host;
  CHECK(build_chain(plain).placer == nullptr);
}

TEST_CASE("threads share one resource") {
  fixture f(budgets(16 * granule, 64 * granule));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&f, t] {
      const stream_handle s = stream_key(0x1000 + t);
      for (int i = 0; i < 200; ++i) {
        const std::size_t n = (static_cast<std::size_t>(i % 3) + 1) * granule / 2;
        void* p = f.resource.allocate(n, s);
        fill(p, n, static_cast<std::uint8_t>(t));
        if (i % 17 == 0) f.resource.prefetch(p, n, i % 2 == 0 ? placement::host : placement::device, s);
        CHECK_MESSAGE(intact(p, n, static_cast<std::uint8_t>(t)), "contents changed");
        f.resource.deallocate(p, n, s);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK_EQ(f.resource.stats().allocated_bytes, 0u);
  CHECK_EQ(f.resource.stats().alloc_count, 800u);
}
