// fault_injecting_adaptor alone and under the pool: every injected failure surfaces as
// out_of_memory with the request and a stats snapshot, nothing leaks, the resource above keeps
// working, and the pool's release-and-retry turns a refused segment into a success once it has
// given its cached segments back.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "fake_ordering.hpp"
#include "gpumem/fault_injecting_adaptor.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/limiting_adaptor.hpp"
#include "gpumem/pool_resource.hpp"
#include "pool_test_support.hpp"

using namespace gpumem;
using namespace gpumem::test;

namespace {

fault_options every(std::uint64_t n) {
  fault_options o;
  o.fail_every = n;
  return o;
}

fault_options budget(std::uint64_t bytes) {
  fault_options o;
  o.fail_after_bytes = bytes;
  return o;
}

// Fills a block with a byte pattern, and checks it is still there.
void fill(void* p, std::size_t n, unsigned char v) { std::memset(p, v, n); }
bool holds(const void* p, std::size_t n, unsigned char v) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i)
    if (b[i] != v) return false;
  return true;
}

}  // namespace

TEST_CASE("every nth allocation fails with out of memory") {
  host_resource host;
  fault_injecting_adaptor fault(host, every(3));
  struct held {
    void* ptr;
    std::size_t bytes;
    unsigned char value;
  };
  std::vector<held> live;
  for (int i = 1; i <= 9; ++i) {
    const std::size_t bytes = 1000 + static_cast<std::size_t>(i);
    if (i % 3 == 0) {
      try {
        fault.allocate(bytes);
        CHECK(false);
      } catch (const out_of_memory& e) {
        CHECK_EQ(e.requested_bytes(), bytes);
        CHECK_EQ(e.stats().oom_count, static_cast<std::uint64_t>(i / 3));  // this failure included
        CHECK_EQ(e.stats().allocated_bytes, host.stats().allocated_bytes);
        const std::string message = e.what();
        CHECK(message.find("fail_every 3") != std::string::npos);
        CHECK(message.find("#" + std::to_string(i)) != std::string::npos);
      }
    } else {
      void* p = fault.allocate(bytes);
      fill(p, bytes, static_cast<unsigned char>(i));
      live.push_back({p, bytes, static_cast<unsigned char>(i)});
    }
  }
  CHECK_EQ(fault.attempts(), 9u);
  CHECK_EQ(fault.injected_failures(), 3u);
  resource_stats s = fault.stats();
  CHECK_EQ(s.alloc_count, 6u);  // the upstream never saw the failed ones
  CHECK_EQ(s.oom_count, 3u);
  CHECK_EQ(host.stats().oom_count, 0u);
  CHECK_EQ(fault.held_bytes(), s.allocated_bytes);
  for (const held& h : live) {
    CHECK(holds(h.ptr, h.bytes, h.value));
    fault.deallocate(h.ptr, h.bytes);
  }
  CHECK_EQ(host.stats().allocated_bytes, 0u);
  CHECK_EQ(fault.held_bytes(), 0u);
  CHECK_EQ(fault.stats().free_count, 6u);
}

TEST_CASE("a byte budget refuses what would pass it") {
  host_resource host;
  fault_injecting_adaptor fault(host, budget(10000));
  void* a = fault.allocate(6000);
  try {
    fault.allocate(5000);
    CHECK(false);
  } catch (const out_of_memory& e) {
    CHECK_EQ(e.requested_bytes(), 5000u);
    CHECK_EQ(e.stats().oom_count, 1u);
    CHECK(std::string(e.what()).find("fail_after_bytes") != std::string::npos);
  }
  CHECK_EQ(fault.held_bytes(), 6000u);
  void* b = fault.allocate(4000);  // exactly the budget
  CHECK_EQ(fault.held_bytes(), 10000u);
  CHECK_THROWS_AS(fault.allocate(1), out_of_memory);
  fault.deallocate(a, 6000);
  void* c = fault.allocate(5000);  // fits again once memory is given back
  CHECK_EQ(fault.held_bytes(), 9000u);
  CHECK_EQ(fault.injected_failures(), 2u);
  CHECK_EQ(host.stats().allocated_bytes, 9000u);
  fault.deallocate(b, 4000);
  fault.deallocate(c, 5000);
  CHECK_EQ(host.stats().allocated_bytes, 0u);
  CHECK_EQ(fault.held_bytes(), 0u);
}

TEST_CASE("a zero budget fails every allocation") {
  host_resource host;
  fault_injecting_adaptor fault(host, budget(0));
  CHECK_THROWS_AS(fault.allocate(1), out_of_memory);
  CHECK_THROWS_AS(fault.allocate(MiB), out_of_memory);
  CHECK_EQ(fault.injected_failures(), 2u);
  CHECK_EQ(host.stats().alloc_count, 0u);
}

TEST_CASE("no options means no faults") {
  host_resource host;
  fault_injecting_adaptor fault(host, fault_options{});
  std::vector<void*> live;
  for (int i = 0; i < 100; ++i) live.push_back(fault.allocate(256));
  CHECK_EQ(fault.injected_failures(), 0u);
  for (void* p : live) fault.deallocate(p, 256);
  CHECK_EQ(fault.stats().allocated_bytes, 0u);
}

TEST_CASE("an upstream failure is not counted and rolls back the bytes held") {
  host_resource host;
  limiting_adaptor limited(host, 4 * KiB);
  fault_injecting_adaptor fault(limited, budget(1 * MiB));
  CHECK_THROWS_AS(fault.allocate(8 * KiB), out_of_memory);  // the limit refuses, not the budget
  CHECK_EQ(fault.injected_failures(), 0u);
  CHECK_EQ(fault.held_bytes(), 0u);
  CHECK_EQ(fault.stats().oom_count, 1u);  // the limiting layer's
  void* p = fault.allocate(4 * KiB);
  CHECK_EQ(fault.held_bytes(), 4 * KiB);
  fault.deallocate(p, 4 * KiB);
  CHECK_EQ(fault.held_bytes(), 0u);
}

TEST_CASE("bad frees are rejected by the upstream and change nothing") {
  host_resource host;
  fault_injecting_adaptor fault(host, budget(1 * MiB));
  void* p = fault.allocate(4096);
  int not_ours = 0;
  CHECK_THROWS_AS(fault.deallocate(&not_ours, 4096), invalid_argument);
  CHECK_THROWS_AS(fault.deallocate(p, 4095), invalid_argument);
  CHECK_EQ(fault.held_bytes(), 4096u);
  fault.deallocate(p, 4096);
  CHECK_THROWS_AS(fault.deallocate(p, 4096), invalid_argument);  // double free
  CHECK_EQ(fault.held_bytes(), 0u);
  CHECK_EQ(host.stats().allocated_bytes, 0u);
}

TEST_CASE("pool over faults every nth segment surfaces as out of memory") {
  host_resource host;
  fault_injecting_adaptor fault(host, every(4));
  pool_resource pool(fault);
  std::vector<void*> live;
  std::uint64_t failures = 0;
  for (int i = 1; i <= 20; ++i) {
    // 3 MiB is large: each request needs a 4 MiB segment of its own, and nothing is cached to
    // release, so the pool cannot retry.
    const resource_stats before = pool.stats();
    try {
      void* p = pool.allocate(3 * MiB);
      fill(p, 3 * MiB, static_cast<unsigned char>(live.size()));
      live.push_back(p);
    } catch (const out_of_memory& e) {
      ++failures;
      CHECK_EQ(i % 4, 0);
      CHECK_EQ(e.requested_bytes(), 3 * MiB);
      CHECK_EQ(e.stats().oom_count, failures);
      CHECK_EQ(e.stats().allocated_bytes, before.allocated_bytes);
      CHECK_EQ(e.stats().reserved_bytes, before.reserved_bytes);
      CHECK(std::string(e.what()).find("injected") != std::string::npos);
    }
  }
  CHECK_EQ(failures, 5u);
  CHECK_EQ(fault.injected_failures(), 5u);
  resource_stats s = pool.stats();
  CHECK_EQ(s.alloc_count, 15u);
  CHECK_EQ(s.oom_count, 5u);
  CHECK_EQ(s.allocated_bytes, 15 * 3 * MiB);
  CHECK_EQ(s.reserved_bytes, 15 * 4 * MiB);
  CHECK_EQ(s.upstream_alloc_count, 15u);
  CHECK_EQ(s.segment_count, 15u);
  CHECK_EQ(host.stats().allocated_bytes, 15 * 4 * MiB);
  for (std::size_t k = 0; k < live.size(); ++k) {
    CHECK(holds(live[k], 3 * MiB, static_cast<unsigned char>(k)));
    pool.deallocate(live[k], 3 * MiB);
  }
  // Still works, from its cache (no upstream call that could fail).
  void* again = pool.allocate(3 * MiB);
  CHECK_EQ(pool.stats().upstream_alloc_count, 15u);
  pool.deallocate(again, 3 * MiB);
  pool.trim(0);
  CHECK_EQ(pool.stats().reserved_bytes, 0u);
  CHECK_EQ(fault.held_bytes(), 0u);
  CHECK_EQ(host.stats().allocated_bytes, 0u);
}

TEST_CASE("pool release and retry succeeds past a budget") {
  host_resource host;
  fault_injecting_adaptor fault(host, budget(8 * MiB));
  pool_resource pool(fault);
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(pool.allocate(1 * MiB));  // 4 small segments: the budget
  for (void* p : blocks) pool.deallocate(p, 1 * MiB);
  resource_stats s = pool.stats();
  CHECK_EQ(s.reserved_bytes, 8 * MiB);
  CHECK_EQ(s.allocated_bytes, 0u);
  CHECK_EQ(s.upstream_free_count, 0u);
  CHECK_EQ(fault.held_bytes(), 8 * MiB);

  // A large request cannot use the cached small segments; its 4 MiB segment would pass the budget,
  // so the first upstream call fails; the pool releases its cache and the retry succeeds.
  void* large = pool.allocate(4 * MiB);
  fill(large, 4 * MiB, 0x5A);
  s = pool.stats();
  CHECK_EQ(fault.injected_failures(), 1u);
  CHECK_EQ(fault.attempts(), 6u);  // 4 segments, the refused one, the retry
  CHECK_EQ(s.upstream_free_count, 4u);
  CHECK_EQ(s.upstream_alloc_count, 5u);
  CHECK_EQ(s.segment_count, 1u);
  CHECK_EQ(s.reserved_bytes, 4 * MiB);
  CHECK_EQ(s.allocated_bytes, 4 * MiB);
  CHECK_EQ(s.oom_count, 0u);  // the caller never saw a failure
  CHECK_EQ(fault.held_bytes(), 4 * MiB);
  CHECK(holds(large, 4 * MiB, 0x5A));
  pool.deallocate(large, 4 * MiB);
  pool.trim(0);
  CHECK_EQ(fault.held_bytes(), 0u);
  CHECK_EQ(host.stats().allocated_bytes, 0u);
}

TEST_CASE("pool release and retry succeeds after an nth failure") {
  host_resource host;
  fault_injecting_adaptor fault(host, every(3));
  pool_resource pool(fault);
  void* a = pool.allocate(3 * MiB);  // attempt 1
  void* b = pool.allocate(3 * MiB);  // attempt 2
  pool.deallocate(a, 3 * MiB);
  pool.deallocate(b, 3 * MiB);
  // 5 MiB fits neither cached 4 MiB segment: attempt 3 fails, both are released, attempt 4 succeeds.
  void* c = pool.allocate(5 * MiB);
  resource_stats s = pool.stats();
  CHECK_EQ(fault.injected_failures(), 1u);
  CHECK_EQ(fault.attempts(), 4u);
  CHECK_EQ(s.upstream_free_count, 2u);
  CHECK_EQ(s.upstream_alloc_count, 3u);
  CHECK_EQ(s.reserved_bytes, 6 * MiB);
  CHECK_EQ(s.oom_count, 0u);
  pool.deallocate(c, 5 * MiB);
  pool.trim(0);
  CHECK_EQ(host.stats().allocated_bytes, 0u);
}

TEST_CASE("pool retry that cannot help fails and keeps live memory") {
  host_resource host;
  fault_injecting_adaptor fault(host, budget(4 * MiB));
  pool_resource pool(fault);
  const std::size_t big = 2 * MiB + 512 * KiB;
  void* a = pool.allocate(big);  // a 4 MiB segment: the whole budget
  try {
    pool.allocate(100);  // needs a 2 MiB small segment; nothing cached can be released
    CHECK(false);
  } catch (const out_of_memory& e) {
    CHECK_EQ(e.requested_bytes(), 100u);
    CHECK_EQ(e.stats().allocated_bytes, big);
    CHECK_EQ(e.stats().oom_count, 1u);
  }
  resource_stats s = pool.stats();
  CHECK_EQ(s.upstream_free_count, 0u);
  CHECK_EQ(s.segment_count, 1u);
  CHECK_EQ(fault.held_bytes(), 4 * MiB);
  void* tail = pool.allocate(1 * MiB + 1);  // still works: large, from the segment's free tail
  pool.deallocate(tail, 1 * MiB + 1);
  pool.deallocate(a, big);
  void* small = pool.allocate(100);  // now the free large segment is released for a small one
  s = pool.stats();
  CHECK_EQ(s.upstream_free_count, 1u);
  CHECK_EQ(s.oom_count, 1u);
  CHECK_EQ(fault.injected_failures(), 2u);
  pool.deallocate(small, 100);
  pool.trim(0);
  CHECK_EQ(host.stats().allocated_bytes, 0u);
}

// Four threads on their own streams through pool -> fault -> host: failures land on random threads;
// every one is an out_of_memory, the pool's counts are exact, and nothing is left at the end.
TEST_CASE("threads meet injected failures without leaks") {
  constexpr int threads_n = 4;
  constexpr int iterations = 4000;
  host_resource host;
  fault_injecting_adaptor fault(host, every(5));
  pool_options options;
  options.small_segment_bytes = 64 * KiB;  // small segments fill fast: many upstream calls
  options.small_request_limit = 32 * KiB;
  options.large_segment_rounding = 64 * KiB;
  pool_resource pool(fault, options);
  std::atomic<std::uint64_t> served{0}, refused{0}, corrupted{0}, other_errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_n; ++t) {
    threads.emplace_back([&, t] {
      const stream_handle stream = stream_key(0x200 + static_cast<std::uintptr_t>(t));
      std::mt19937 rng(77 + t);
      std::vector<std::pair<void*, std::size_t>> live;
      try {
        for (int i = 0; i < iterations; ++i) {
          if (live.size() >= 24 || (!live.empty() && rng() % 3 == 0)) {
            auto [p, n] = live.back();
            live.pop_back();
            if (!holds(p, n, static_cast<unsigned char>(t + 1))) corrupted.fetch_add(1);
            pool.deallocate(p, n, stream);
            pool.trim(0);  // keep the pool going back upstream, where the faults are
            continue;
          }
          const std::size_t n = 1 + rng() % (48 * KiB);
          try {
            void* p = pool.allocate(n, stream);
            fill(p, n, static_cast<unsigned char>(t + 1));
            live.emplace_back(p, n);
            served.fetch_add(1);
          } catch (const out_of_memory&) {
            refused.fetch_add(1);
          }
        }
        for (auto [p, n] : live) {
          if (!holds(p, n, static_cast<unsigned char>(t + 1))) corrupted.fetch_add(1);
          pool.deallocate(p, n, stream);
        }
      } catch (...) {
        other_errors.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK_EQ(corrupted.load(), 0u);
  CHECK_EQ(other_errors.load(), 0u);
  CHECK(refused.load() > 0u);  // the faults did happen
  const resource_stats s = pool.stats();
  CHECK_EQ(s.alloc_count, served.load());
  CHECK_EQ(s.free_count, served.load());
  CHECK_EQ(s.oom_count, refused.load());
  CHECK_EQ(s.allocated_bytes, 0u);
  CHECK(fault.injected_failures() >= refused.load());  // some were absorbed by release-and-retry
  pool.trim(0);
  CHECK_EQ(pool.stats().reserved_bytes, 0u);
  CHECK_EQ(fault.held_bytes(), 0u);
  CHECK_EQ(host.stats().allocated_bytes, 0u);
}
