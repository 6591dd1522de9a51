// expandable_resource across streams (with the fake stream ordering) and when memory runs out:
// one range per stream, memory freed on another stream reused only after an event, record_stream,
// destroyed streams, release-and-retry when a run cannot be mapped (a limit, injected faults),
// the chain builder's layers for 'expandable', and the out-of-memory message's figures.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "expandable_test_support.hpp"
#include "fake_ordering.hpp"
#include "gpumem/chain_builder.hpp"
#include "gpumem/device.hpp"
#include "gpumem/expandable_resource.hpp"
#include "gpumem/vmm.hpp"
#include "gpumem/strategy_registry.hpp"
#include "pool_test_support.hpp"

using namespace gpumem;
using namespace gpumem::test;

namespace {

using fixture = expandable_fixture;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& n : v) s += (s.empty() ? "" : " ") + n;
  return s;
}

}  // namespace

TEST_CASE("each stream has its own range") {
  fixture f;
  void* a = f.resource.allocate(1000, stream_a);
  void* b = f.resource.allocate(1000, stream_b);
  CHECK_EQ(f.resource.range_count(), 2u);
  const std::uintptr_t distance = addr(a) > addr(b) ? addr(a) - addr(b) : addr(b) - addr(a);
  CHECK(distance >= 64 * MiB);
  CHECK_EQ(f.resource.stats().segment_count, 2u);
  CHECK(f.log->waits.empty());  // same-stream use needs no event
  f.resource.deallocate(a, 1000, stream_a);
  f.resource.deallocate(b, 1000, stream_b);
}

TEST_CASE("memory freed on another stream is reused after an event") {
  fixture f;
  void* a = f.resource.allocate(100 * KiB, stream_a);
  f.resource.deallocate(a, 100 * KiB, stream_b);  // B used it last
  CHECK(f.log->waits.empty());                    // freeing records nothing
  void* again = f.resource.allocate(100 * KiB, stream_a);
  CHECK_EQ(again, a);                    // A's range, A's memory
  CHECK(waited(*f.log, stream_a, stream_b));  // but only after A waits on B's work
  const std::size_t waits = f.log->waits.size();
  f.resource.deallocate(again, 100 * KiB, stream_a);
  void* third = f.resource.allocate(100 * KiB, stream_a);
  CHECK_EQ(f.log->waits.size(), waits);  // freed on A itself this time: no wait
  f.resource.deallocate(third, 100 * KiB, stream_a);
  CHECK_EQ(f.log->unreleased(), 0u);
}

TEST_CASE("merged free blocks carry every stream to wait on") {
  fixture f;
  void* a = f.resource.allocate(10 * KiB, stream_a);
  void* b = f.resource.allocate(10 * KiB, stream_a);
  void* c = f.resource.allocate(10 * KiB, stream_a);
  f.resource.deallocate(a, 10 * KiB, stream_b);
  f.resource.deallocate(b, 10 * KiB, stream_c);
  f.resource.deallocate(c, 10 * KiB, stream_a);  // merges with a's and b's pieces and the tail
  void* whole = f.resource.allocate(30 * KiB, stream_a);
  CHECK_EQ(whole, a);
  CHECK(waited(*f.log, stream_a, stream_b));
  CHECK(waited(*f.log, stream_a, stream_c));
  f.resource.deallocate(whole, 30 * KiB, stream_a);
}

TEST_CASE("record stream parks the block until its event completes") {
  fixture f;
  void* a = f.resource.allocate(3 * granule, stream_a);
  f.resource.record_stream(a, stream_b);
  f.resource.deallocate(a, 3 * granule, stream_a);
  CHECK_EQ(f.resource.pending_free_blocks(), 1u);
  CHECK_EQ(f.resource.idle_bytes(), 0u);  // a parked block keeps its granules in use
  void* other = f.resource.allocate(granule, stream_a);
  CHECK(addr(other) >= addr(a) + 3 * granule);  // not a's memory yet
  f.log->complete_all();
  CHECK_EQ(f.resource.pending_free_blocks(), 0u);
  void* again = f.resource.allocate(3 * granule, stream_a);
  CHECK_EQ(again, a);
  f.resource.deallocate(again, 3 * granule, stream_a);
  f.resource.deallocate(other, granule, stream_a);
  CHECK_EQ(f.log->unreleased(), 0u);
}

TEST_CASE("unmapping waits for the streams that used the memory") {
  fixture f;
  void* a = f.resource.allocate(4 * granule, stream_a);
  f.resource.deallocate(a, 4 * granule, stream_b);
  const std::size_t before = f.log->synchronizes;
  f.resource.trim(0);
  CHECK(f.log->synchronizes >= before + 2);  // A's work and B's, on the host, before unmapping
  CHECK_EQ(f.resource.stats().reserved_bytes, 0u);
  // The wait is done: reusing the memory needs none.
  const std::size_t waits = f.log->waits.size();
  void* again = f.resource.allocate(4 * granule, stream_a);
  CHECK_EQ(f.log->waits.size(), waits);
  f.resource.deallocate(again, 4 * granule, stream_a);
}

TEST_CASE("a destroyed streams range goes once its blocks are freed") {
  fixture f;
  void* a = f.resource.allocate(2 * granule, stream_a);
  void* b = f.resource.allocate(granule, stream_b);
  f.resource.deallocate(b, granule, stream_b);
  f.log->destroy_stream(stream_b);  // nothing in use: B's range goes at once
  CHECK_EQ(f.resource.range_count(), 1u);
  f.log->destroy_stream(stream_a);  // a is still live
  CHECK_EQ(f.resource.range_count(), 1u);
  f.log->reuse_handle(stream_a);
  void* fresh = f.resource.allocate(granule, stream_a);  // a new stream with the old handle: a new range
  CHECK_EQ(f.resource.range_count(), 2u);
  CHECK((addr(fresh) < addr(a) || addr(fresh) >= addr(a) + 64 * MiB));
  std::memset(a, 1, 2 * granule);
  f.resource.deallocate(a, 2 * granule, stream_c);
  CHECK_EQ(f.resource.range_count(), 1u);
  CHECK_EQ(f.resource.stats().reserved_bytes, granule);
  f.resource.deallocate(fresh, granule, stream_a);
}

TEST_CASE("a failed map releases every streams idle runs and retries") {
  fixture f(make_limited_vmm(make_host_vmm(granule), 8 * granule));
  void* a = f.resource.allocate(6 * granule, stream_a);
  f.resource.deallocate(a, 6 * granule, stream_a);  // an idle run of 6 granules on A
  void* b = f.resource.allocate(5 * granule, stream_b);  // B needs 5 more than the 2 left: A's run goes
  resource_stats s = f.resource.stats();
  CHECK_EQ(s.oom_count, 0u);
  CHECK_EQ(s.reserved_bytes, 5 * granule);
  CHECK_EQ(s.upstream_free_count, 1u);   // A's run; B's failed run mapped nothing
  CHECK_EQ(s.upstream_alloc_count, 2u);  // A's run, then B's on the retry
  std::memset(b, 1, 5 * granule);

  // Nothing idle to release: out_of_memory, and the resource is as it was.
  try {
    f.resource.allocate(4 * granule, stream_a);
    CHECK(false);
  } catch (const out_of_memory& e) {
    CHECK_EQ(e.requested_bytes(), 4 * granule);
    CHECK_EQ(e.stats().oom_count, 1u);
    CHECK_EQ(e.stats().reserved_bytes, 5 * granule);
    const std::string message = e.what();
    CHECK(message.find("limit") != std::string::npos);
    CHECK(message.find("reserved 320.00 KiB, allocated 320.00 KiB: 0 B reserved but unallocated") != std::string::npos);
    CHECK(message.find("largest free block 0 B") != std::string::npos);
  }
  s = f.resource.stats();
  CHECK_EQ(s.reserved_bytes, 5 * granule);
  CHECK_EQ(s.allocated_bytes, 5 * granule);
  void* c = f.resource.allocate(3 * granule, stream_a);  // what is left still works
  CHECK_EQ(c, a);
  f.resource.deallocate(c, 3 * granule, stream_a);
  f.resource.deallocate(b, 5 * granule, stream_b);
}

TEST_CASE("a failed map in the middle unmaps what it mapped") {
  fault_options faults;
  faults.fail_every = 4;  // the fourth run map fails
  fixture f(make_fault_injecting_vmm(make_host_vmm(granule), faults));
  void* a = f.resource.allocate(2 * granule, stream_a);  // run #1: granules 0..1
  void* m = f.resource.allocate(granule, stream_a);      // run #2: granule 2
  f.resource.deallocate(a, 2 * granule, stream_a);
  f.resource.trim(0);                                     // a's run goes; m's is in use
  f.resource.deallocate(m, granule, stream_a);            // m's run idle, still mapped
  // 4 granules from 0: run #3 (granules 0..1) maps, run #4 (granule 3) fails. The retry has nothing
  // to release (granule 2 belongs to the allocation being made): run #3 is given back.
  CHECK_THROWS_AS(f.resource.allocate(4 * granule, stream_a), out_of_memory);
  resource_stats s = f.resource.stats();
  CHECK_EQ(s.reserved_bytes, granule);  // m's run only
  CHECK_EQ(s.upstream_alloc_count, 3u);
  CHECK_EQ(s.upstream_free_count, 2u);
  CHECK_EQ(s.segment_count, 1u);
  CHECK_EQ(s.allocated_bytes, 0u);
  CHECK_EQ(s.oom_count, 1u);
  void* b = f.resource.allocate(2 * granule, stream_a);  // run #5: granules 0..1 again
  CHECK_EQ(b, a);
  CHECK_EQ(f.resource.stats().reserved_bytes, 3 * granule);
  std::memset(b, 1, 2 * granule);
  f.resource.deallocate(b, 2 * granule, stream_a);
  f.resource.trim(0);
  CHECK_EQ(f.resource.stats().reserved_bytes, 0u);
}

TEST_CASE("a request beyond the range is out of memory") {
  fixture f;
  CHECK_THROWS_AS(f.resource.allocate(65 * MiB), out_of_memory);
  void* a = f.resource.allocate(40 * MiB);
  CHECK_THROWS_AS(f.resource.allocate(30 * MiB), out_of_memory);  // the range is 64 MiB
  CHECK_EQ(f.resource.stats().oom_count, 2u);
  f.resource.deallocate(a, 40 * MiB);
  void* b = f.resource.allocate(60 * MiB);
  f.resource.deallocate(b, 60 * MiB);
}

TEST_CASE("chain builder puts limit and fault on the granule mapper") {
  chain_spec spec;
  spec.strategy = "expandable";
  CHECK_EQ(join(chain_layers(spec)), std::string("vmm expandable"));
  spec.options<expandable_spec>().backing = placement::host;
  spec.limit_bytes = 4 * MiB;
  spec.fault_injection = fault_spec{std::nullopt, std::uint64_t{64 * MiB}};
  spec.tracking_capacity = 16;
  CHECK_EQ(join(chain_layers(spec)), std::string("mmap fault limit expandable track"));
  CHECK_EQ(parse_strategy("expandable").name, std::string("expandable"));

  spec.options<expandable_spec>().options.reserve_bytes = 64 * MiB;
  resource_chain chain = build_chain(spec);
  CHECK_EQ(chain.layers.size(), 2u);  // expandable and tracking; the rest wraps its physical memory
  memory_resource& top = chain.top();
  CHECK(top.kind() == memory_kind::host);
  void* a = top.allocate(3 * MiB);
  CHECK_THROWS_AS(top.allocate(2 * MiB), out_of_memory);  // 3 MiB (2 granules) + 1 more passes 4 MiB
  top.deallocate(a, 3 * MiB);
  void* b = top.allocate(4 * MiB);  // the limit is on mapped bytes
  top.deallocate(b, 4 * MiB);
  CHECK_EQ(chain.tracker->events(false).size(), 5u);  // 2 allocations, 1 oom, 2 frees

  spec.options<expandable_spec>().options.gc_threshold = 2;
  try {
    build_chain(spec);
    CHECK(false);
  } catch (const invalid_argument& e) {
    CHECK_EQ(e.argument(), std::string("gcThreshold"));
  }
}

// Without CUDA (or a driver) the device backing is an invalid_state naming the strategy. With a GPU
// (GPUMEM_CTEST_CUDA=ON on a GPU host) the same chain runs on CUDA VMM: data written through the
// mapped granules reads back, streams order reuse with real events, trim unmaps, and the cycle
// pattern reserves what it allocates.
TEST_CASE("the device backing on cuda vmm or says what is missing") {
  if (device_count() == 0) {
    chain_spec spec;
    spec.strategy = "expandable";
    try {
      build_chain(spec);
      CHECK(false);
    } catch (const invalid_state& e) {
      CHECK(std::string(e.what()).find("expandable") != std::string::npos);
    }
    return;
  }
  expandable_resource r(make_device_vmm(0));
  MESSAGE("device granule " << r.granule_bytes() << ", reserve per stream " << format_bytes(r.options().reserve_bytes));
  CHECK(r.kind() == memory_kind::device);
  const stream_handle s1 = create_stream(0);
  const stream_handle s2 = create_stream(0);
  std::vector<std::uint32_t> data(3 * MiB / 4), back(data.size());
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint32_t>(i * 2654435761u);
  void* a = r.allocate(3 * MiB, s1);
  copy_to(a, memory_kind::device, data.data(), 3 * MiB, s1);
  copy_from(back.data(), a, memory_kind::device, 3 * MiB, s1);
  CHECK(back == data);
  void* b = r.allocate(5 * MiB, s2);  // another stream: another range
  copy_to(b, memory_kind::device, data.data(), 3 * MiB, s2);
  r.deallocate(b, 5 * MiB, s1);       // freed on s1: s2 waits on an event before reusing it
  void* c = r.allocate(5 * MiB, s2);
  CHECK_EQ(c, b);
  r.deallocate(c, 5 * MiB, s2);
  r.trim(0);
  const std::size_t g = r.granule_bytes();
  CHECK_EQ(r.stats().reserved_bytes, (3 * MiB + g - 1) / g * g);  // a's granules only
  copy_from(back.data(), a, memory_kind::device, 3 * MiB, s1);
  CHECK(back == data);
  r.deallocate(a, 3 * MiB, s1);
  std::vector<void*> kept;
  for (std::size_t k = 0; k < 20; ++k) {
    kept.push_back(r.allocate(48 * MiB, s1));
    const std::size_t temporary = 128 * MiB + 4 * MiB * k;
    r.deallocate(r.allocate(temporary, s1), temporary, s1);
  }
  const resource_stats st = r.stats();
  MESSAGE("cycle x20 on the GPU: peak reserved " << format_bytes(st.peak_reserved_bytes) << ", peak allocated "
                                                 << format_bytes(st.peak_allocated_bytes));
  CHECK(static_cast<double>(st.peak_reserved_bytes) <= 1.02 * static_cast<double>(st.peak_allocated_bytes));
  for (void* p : kept) r.deallocate(p, 48 * MiB, s1);
  r.trim(0);
  CHECK_EQ(r.stats().reserved_bytes, 0u);
  destroy_stream(s1);
  destroy_stream(s2);
  CHECK_EQ(r.range_count(), 0u);  // both streams' ranges went with them
}

// Threads share the resource: two on their own streams, two on the default stream's range, with
// frees on another thread's stream and trims in between. Every block keeps what its thread wrote.
TEST_CASE("threads share the resource") {
  expandable_options o = small_range();
  o.release_threshold = 4 * granule;  // unmapping at free, under the lock, while others allocate
  expandable_resource resource(make_host_vmm(granule), o);
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const stream_handle own = t < 2 ? stream_key(0x100 + t) : nullptr;
      std::uint32_t state = 12345u + static_cast<std::uint32_t>(t);
      std::vector<std::pair<unsigned char*, std::size_t>> live;
      for (int i = 0; i < 2000; ++i) {
        state = state * 1664525u + 1013904223u;
        if (live.size() < 8 && (state >> 28) < 10) {
          const std::size_t bytes = 512 + (state >> 8) % (3 * granule);
          auto* p = static_cast<unsigned char*>(resource.allocate(bytes, own));
          std::memset(p, t + 1, bytes);
          live.emplace_back(p, bytes);
        } else if (!live.empty()) {
          auto [p, bytes] = live.back();
          live.pop_back();
          if (p[0] != t + 1 || p[bytes - 1] != t + 1) ++failures[t];
          resource.deallocate(p, bytes, i % 3 == 0 ? stream_key(0x200) : own);
        }
        if (i % 500 == 0) resource.trim(0);
      }
      for (auto [p, bytes] : live) resource.deallocate(p, bytes, own);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) CHECK_EQ(failures[t], 0);
  CHECK_EQ(resource.stats().allocated_bytes, 0u);
  resource.trim(0);
  CHECK_EQ(resource.stats().reserved_bytes, 0u);
}
