// The host leaf and the adaptors over it (limiting, statistics, tracking, prefetch, fault
// injection), alone and stacked: statistics exact after each call, bad frees rejected without a
// change, failures rolled back, and a chain shared by several threads.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "fake_ordering.hpp"
#include "gpumem/fault_injecting_adaptor.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/limiting_adaptor.hpp"
#include "gpumem/prefetch_adaptor.hpp"
#include "gpumem/statistics_adaptor.hpp"
#include "gpumem/tracking_adaptor.hpp"
#include "pool_test_support.hpp"

using namespace gpumem;
using namespace gpumem::test;

namespace {

fault_options every(std::uint64_t n) {
  fault_options o;
  o.fail_every = n;
  return o;
}

}  // namespace

TEST_CASE("host resource aligns counts and rejects bad frees") {
  host_resource host;
  std::vector<std::pair<void*, std::size_t>> live;
  std::set<std::uintptr_t> seen;
  std::size_t total = 0;
  for (std::size_t n : {1u, 255u, 256u, 257u, 4096u, 100000u}) {
    void* p = host.allocate(n);
    CHECK_EQ(addr(p) % host_resource::alignment, 0u);
    CHECK(seen.insert(addr(p)).second);
    std::memset(p, 0xAB, n);  // the whole request is writable (ASan checks the bounds)
    CHECK_EQ(host.allocation_size(p), n);
    live.emplace_back(p, n);
    total += n;
  }
  resource_stats s = host.stats();
  CHECK_EQ(s.allocated_bytes, total);
  CHECK_EQ(s.peak_allocated_bytes, total);
  CHECK_EQ(s.alloc_count, 6u);
  CHECK_EQ(s.upstream_alloc_count, 6u);
  CHECK_EQ(s.segment_count, 6u);
  CHECK(s.reserved_bytes >= total);
  CHECK_EQ(s.reserved_bytes % host_resource::alignment, 0u);
  CHECK_EQ(s.largest_free_block, -1);
  CHECK(host.kind() == memory_kind::host);
  CHECK_EQ(host.device(), -1);
  CHECK(!host.prefetch(live[0].first, live[0].second, placement::device));

  int not_ours = 0;
  CHECK_THROWS_AS(host.deallocate(&not_ours, 4), invalid_argument);
  CHECK_THROWS_AS(host.deallocate(live[0].first, live[0].second + 1), invalid_argument);
  CHECK_THROWS_AS(host.allocate(0), invalid_argument);
  CHECK_EQ(host.stats().allocated_bytes, total);
  CHECK_EQ(host.allocation_size(&not_ours), 0u);

  for (auto [p, n] : live) host.deallocate(p, n);
  CHECK_THROWS_AS(host.deallocate(live[0].first, live[0].second), invalid_argument);  // double free
  s = host.stats();
  CHECK_EQ(s.allocated_bytes, 0u);
  CHECK_EQ(s.reserved_bytes, 0u);
  CHECK_EQ(s.free_count, 6u);
  CHECK_EQ(s.upstream_free_count, 6u);
  CHECK_EQ(s.peak_allocated_bytes, total);
  host.reset_peak();
  CHECK_EQ(host.stats().peak_allocated_bytes, 0u);
}

TEST_CASE("host resource frees what is left when destroyed") {
  // The leak checker (ASan builds) fails this test if the destructor forgets a block.
  host_resource host;
  for (int i = 0; i < 10; ++i) (void)host.allocate(1000 + i);
  CHECK_EQ(host.stats().alloc_count, 10u);
}

TEST_CASE("limiting adaptor caps and rolls back when the upstream fails") {
  host_resource host;
  fault_injecting_adaptor fault(host, every(2));
  limiting_adaptor limit(fault, 10 * KiB);
  void* a = limit.allocate(4 * KiB);                      // attempt 1 below
  CHECK_THROWS_AS(limit.allocate(4 * KiB), out_of_memory);  // attempt 2: the upstream fails
  CHECK_EQ(limit.used(), 4 * KiB);                          // rolled back
  void* b = limit.allocate(6 * KiB);                        // attempt 3: exactly the limit
  CHECK_EQ(limit.used(), 10 * KiB);
  try {
    limit.allocate(1);  // refused by the limit: the upstream is not asked
    CHECK(false);
  } catch (const out_of_memory& e) {
    CHECK_EQ(e.requested_bytes(), 1u);
    CHECK(std::string(e.what()).find("limit") != std::string::npos);
  }
  CHECK_EQ(fault.attempts(), 3u);
  resource_stats s = limit.stats();
  CHECK_EQ(s.oom_count, 2u);  // one injected below, one of the limit's own
  CHECK_EQ(s.allocated_bytes, 10 * KiB);
  int not_ours = 0;
  CHECK_THROWS_AS(limit.deallocate(&not_ours, 4), invalid_argument);
  CHECK_EQ(limit.used(), 10 * KiB);
  limit.deallocate(a, 4 * KiB);
  limit.deallocate(b, 6 * KiB);
  CHECK_EQ(limit.used(), 0u);
  CHECK_EQ(host.stats().allocated_bytes, 0u);
}

TEST_CASE("statistics adaptor counts at its own level") {
  host_resource host;
  fault_injecting_adaptor fault(host, every(3));
  statistics_adaptor stats(fault);
  void* a = stats.allocate(100);
  void* b = stats.allocate(300);
  CHECK_THROWS_AS(stats.allocate(50), out_of_memory);
  resource_stats s = stats.stats();
  CHECK_EQ(s.allocated_bytes, 400u);
  CHECK_EQ(s.peak_allocated_bytes, 400u);
  CHECK_EQ(s.alloc_count, 2u);
  CHECK_EQ(s.oom_count, 1u);
  CHECK_EQ(s.upstream_alloc_count, 2u);  // the upstream's
  stats.deallocate(b, 300);
  stats.reset_peak();
  s = stats.stats();
  CHECK_EQ(s.allocated_bytes, 100u);
  CHECK_EQ(s.peak_allocated_bytes, 100u);
  CHECK_EQ(s.free_count, 1u);
  CHECK_THROWS_AS(stats.deallocate(b, 300), invalid_argument);  // double free: nothing counted
  CHECK_EQ(stats.stats().free_count, 1u);
  stats.deallocate(a, 100);
  CHECK_EQ(stats.stats().allocated_bytes, 0u);
  CHECK_EQ(host.stats().allocated_bytes, 0u);
}

TEST_CASE("tracking adaptor records allocations frees and failures") {
  host_resource host;
  fault_injecting_adaptor fault(host, every(3));
  tracking_adaptor track(fault, 4);
  const stream_handle s1 = stream_key(7);
  track.set_tag(11);
  void* a = track.allocate(100, s1);
  track.set_tag(12);
  void* b = track.allocate(200);
  CHECK_THROWS_AS(track.allocate(300), out_of_memory);
  track.deallocate(a, 100, s1);
  std::vector<tracking_event> events = track.events();
  REQUIRE_EQ(events.size(), 4u);
  CHECK_EQ(events[0].action, static_cast<std::uint8_t>(tracking_adaptor::allocate_action));
  CHECK_EQ(events[0].pointer, static_cast<std::uint64_t>(addr(a)));
  CHECK_EQ(events[0].bytes, 100u);
  CHECK_EQ(events[0].stream, static_cast<std::uint64_t>(addr(s1)));
  CHECK_EQ(events[0].tag, 11u);
  CHECK_EQ(events[1].tag, 12u);
  CHECK_EQ(events[2].action, static_cast<std::uint8_t>(tracking_adaptor::oom_action));
  CHECK_EQ(events[2].bytes, 300u);
  CHECK_EQ(events[2].pointer, 0u);
  CHECK_EQ(events[3].action, static_cast<std::uint8_t>(tracking_adaptor::free_action));
  for (std::size_t i = 1; i < events.size(); ++i) CHECK(events[i].time_ns >= events[i - 1].time_ns);
  CHECK_EQ(track.dropped(), 0u);

  // A bad free is not recorded; a full ring drops the oldest.
  int not_ours = 0;
  CHECK_THROWS_AS(track.deallocate(&not_ours, 4), invalid_argument);
  track.deallocate(b, 200);
  events = track.events(true);
  REQUIRE_EQ(events.size(), 4u);
  CHECK_EQ(track.dropped(), 1u);
  CHECK_EQ(events.back().pointer, static_cast<std::uint64_t>(addr(b)));
  CHECK_EQ(track.events().size(), 0u);  // cleared

  track.set_enabled(false);
  void* c = track.allocate(10);
  track.deallocate(c, 10);
  CHECK_EQ(track.events().size(), 0u);
  CHECK_EQ(host.stats().allocated_bytes, 0u);
}

TEST_CASE("prefetch adaptor over host memory changes nothing") {
  host_resource host;
  prefetch_adaptor prefetch(host);
  void* p = prefetch.allocate(4096);
  std::memset(p, 1, 4096);
  CHECK(!prefetch.prefetch(p, 4096, placement::host));
  CHECK_EQ(prefetch.stats().allocated_bytes, 4096u);
  CHECK(prefetch.kind() == memory_kind::host);
  prefetch.deallocate(p, 4096);
  CHECK_EQ(host.stats().allocated_bytes, 0u);
}

// track -> statistics -> limit -> fault -> host, shared by four threads: every call is either
// served or an out_of_memory, each layer's counts agree with the threads' own, and the tracking
// ring saw every event.
TEST_CASE("a chain of adaptors shared by threads") {
  constexpr int threads_n = 4;
  constexpr int iterations = 5000;
  host_resource host;
  fault_injecting_adaptor fault(host, every(7));
  limiting_adaptor limit(fault, 256 * KiB);
  statistics_adaptor stats(limit);
  tracking_adaptor track(stats, 1u << 16);
  std::atomic<std::uint64_t> served{0}, refused{0}, corrupted{0}, other_errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_n; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(5 + t);
      std::vector<std::pair<unsigned char*, std::size_t>> live;
      const auto mark = static_cast<unsigned char>(0x10 + t);
      auto release = [&] {
        auto [p, n] = live.back();
        live.pop_back();
        if (p[0] != mark || p[n - 1] != mark) corrupted.fetch_add(1);
        track.deallocate(p, n);
      };
      try {
        for (int i = 0; i < iterations; ++i) {
          if (!live.empty() && (live.size() >= 8 || rng() % 2 == 0)) {
            release();
            continue;
          }
          const std::size_t n = 1 + rng() % (16 * KiB);
          try {
            auto* p = static_cast<unsigned char*>(track.allocate(n));
            p[0] = p[n - 1] = mark;
            live.emplace_back(p, n);
            served.fetch_add(1);
          } catch (const out_of_memory&) {
            refused.fetch_add(1);
          }
          if (i % 512 == 0) (void)track.stats();
        }
        while (!live.empty()) release();
      } catch (...) {
        other_errors.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK_EQ(corrupted.load(), 0u);
  CHECK_EQ(other_errors.load(), 0u);
  CHECK(refused.load() >= fault.injected_failures());
  CHECK(fault.injected_failures() > 0u);
  const resource_stats s = track.stats();
  CHECK_EQ(s.alloc_count, served.load());
  CHECK_EQ(s.free_count, served.load());
  CHECK_EQ(s.oom_count, refused.load());
  CHECK_EQ(s.allocated_bytes, 0u);
  CHECK_EQ(limit.used(), 0u);
  CHECK_EQ(fault.held_bytes(), 0u);
  CHECK_EQ(host.stats().allocated_bytes, 0u);
  CHECK_EQ(track.events().size(), 2 * served.load() + refused.load());
  CHECK_EQ(track.dropped(), 0u);
}
