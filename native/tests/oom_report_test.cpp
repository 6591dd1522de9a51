// libgpumem_torch.so's out-of-memory report on its own (src/torch/oom_ring.hpp, oom_report.hpp):
// the event ring (wraparound, the live set at the window's start, threads, a live table that runs
// out of room) and the report's verdict from a replay on the address-only twins (a sequence that
// fragments pool at a capacity but fits expandable; live bytes over the capacity; the skip reasons).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "config.hpp"
#include "gpumem/pool_resource.hpp"
#include "oom_report.hpp"
#include "oom_ring.hpp"
#include "replay_twins.hpp"

using gpumem::torch::event_ring;
using gpumem::torch::make_oom_report;
using gpumem::torch::oom_context;
using gpumem::torch::oom_report;
using gpumem::torch::oom_verdict;
using gpumem::torch::ring_action;
using gpumem::torch::ring_window;

namespace {

constexpr std::uint64_t MiB = std::uint64_t{1} << 20;

const void* addr(std::uintptr_t a) { return reinterpret_cast<const void*>(a); }
const void* const stream0 = nullptr;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::uint64_t sum_live(const ring_window& w) {
  std::uint64_t n = 0;
  for (const auto& b : w.live_at_start) n += b.bytes;
  return n;
}

// Fragments pool at 64 MiB: a 40 MiB block freed, and a 2 MiB block carved from its segment; the
// 50 MiB request needs a segment of its own beside the 40 MiB one, which cannot be released while
// the 2 MiB block lives. expandable serves it from the free tail of its range grown by 12 MiB.
void fragment(event_ring& ring) {
  ring.record_alloc(addr(0x10000000), 40 * MiB, stream0);
  ring.record_free(addr(0x10000000), 40 * MiB, stream0);
  ring.record_alloc(addr(0x10000000), 2 * MiB, stream0);
}

// A sequence whose fragmentation is all inside pool's and expandable's blocks: a 60 MiB block freed,
// carved into 30 blocks of 2 MiB, every other one freed (30 MiB live in holes of 2 MiB); 8 MiB fits
// neither (expandable's run of 30 granules is released only whole).
void fragment_both(event_ring& ring) {
  ring.record_alloc(addr(0x1000000), 60 * MiB, stream0);
  ring.record_free(addr(0x1000000), 60 * MiB, stream0);
  for (std::uintptr_t i = 0; i < 30; ++i) ring.record_alloc(addr(0x10000000 + i * 0x200000), 2 * MiB, stream0);
  for (std::uintptr_t i = 0; i < 30; i += 2) ring.record_free(addr(0x10000000 + i * 0x200000), 2 * MiB, stream0);
}

oom_context context_at(std::uint64_t capacity, std::uint64_t live, std::uint64_t request, const std::string& strategy = "pool") {
  oom_context c;
  c.strategy = strategy;
  c.device = 0;
  c.request_bytes = request;
  c.live_bytes = live;
  c.reserved_bytes = 60 * MiB;
  c.largest_free_block = 2 * MiB;
  c.capacity_bytes = capacity;
  c.capacity_source = "the configured limit";
  return c;
}

const gpumem::torch::replay_outcome* outcome(const oom_report& r, const std::string& name) {
  for (const auto& o : r.strategies) {
    if (o.strategy == name) return &o;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("the ring keeps the last N events, oldest first") {
  event_ring ring(4);
  CHECK_EQ(ring.capacity(), 4u);
  for (std::uintptr_t i = 1; i <= 3; ++i) ring.record_alloc(addr(i * 0x1000), i * 100, stream0);
  ring_window w = ring.snapshot();
  CHECK_EQ(w.recorded, 3u);
  CHECK_FALSE(w.overflowed);
  REQUIRE_EQ(w.events.size(), 3u);
  CHECK(w.live_at_start.empty());  // the window starts with the ring

  ring.record_free(addr(0x1000), 999, stream0);  // the size it was allocated with is kept
  ring.record_alloc(addr(0x5000), 500, addr(0x77));
  ring.record_alloc(addr(0x6000), 600, stream0);
  w = ring.snapshot();
  CHECK_EQ(w.recorded, 6u);
  CHECK(w.overflowed);
  REQUIRE_EQ(w.events.size(), 4u);
  CHECK_EQ(w.events[0].ptr, 0x3000u);
  CHECK_EQ(w.events[1].action, ring_action::free);
  CHECK_EQ(w.events[1].bytes, 100u);
  CHECK_EQ(w.events[2].stream, 0x77u);
  CHECK_EQ(w.events[3].bytes, 600u);
  CHECK(w.live_known);
  // Before the window: 0x1000 (freed in it) and 0x2000 (still live) were live; 0x3000 is its first event.
  REQUIRE_EQ(w.live_at_start.size(), 2u);
  CHECK_EQ(w.live_at_start[0].ptr, 0x1000u);
  CHECK_EQ(w.live_at_start[0].bytes, 100u);
  CHECK_EQ(w.live_at_start[1].ptr, 0x2000u);
  CHECK_EQ(w.live_at_start[1].bytes, 200u);
}

TEST_CASE("a free of a block the ring never saw is not recorded") {
  event_ring ring(8);
  ring.record_alloc(addr(0x1000), 10, stream0);
  ring.record_free(addr(0x1000), 10, stream0);
  ring.record_free(addr(0x1000), 10, stream0);  // twice
  ring.record_free(addr(0x9000), 10, stream0);  // never allocated here
  CHECK_EQ(ring.snapshot().recorded, 2u);
}

TEST_CASE("the live set survives wraparound over many blocks (the table's deletions)") {
  event_ring ring(64);
  // Blocks allocated and freed in a scattered order, more than the window holds.
  std::vector<std::uintptr_t> live;
  std::uint64_t live_bytes = 0;
  for (std::uintptr_t i = 0; i < 3000; ++i) {
    const std::uintptr_t p = 0x100000 + i * 0x1000;
    ring.record_alloc(addr(p), 512 + i, stream0);
    live.push_back(p);
    live_bytes += 512 + i;
    if (i % 3 == 2) {
      const std::uintptr_t victim = live[live.size() / 2];
      const std::uint64_t bytes = 512 + (victim - 0x100000) / 0x1000;
      ring.record_free(addr(victim), bytes, stream0);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(live.size() / 2));
      live_bytes -= bytes;
    }
  }
  const ring_window w = ring.snapshot();
  REQUIRE(w.live_known);
  // live at start + the window's allocations - its frees = live now.
  std::int64_t now = static_cast<std::int64_t>(sum_live(w));
  for (const auto& e : w.events) now += e.action == ring_action::alloc ? static_cast<std::int64_t>(e.bytes) : -static_cast<std::int64_t>(e.bytes);
  CHECK_EQ(now, static_cast<std::int64_t>(live_bytes));
}

TEST_CASE("more live blocks than the table holds: the live set is no longer known") {
  event_ring ring(16);
  const std::size_t room = ring.live_capacity();
  CHECK_GE(room, 4096u);
  for (std::uintptr_t i = 0; i <= room; ++i) ring.record_alloc(addr(0x1000 + i * 0x1000), 512, stream0);
  const ring_window w = ring.snapshot();
  CHECK_FALSE(w.live_known);
  CHECK(w.live_at_start.empty());
  CHECK_EQ(w.events.size(), 16u);
  const oom_report r = make_oom_report(context_at(1024 * MiB, 8 * MiB, MiB), &w);
  CHECK_FALSE(r.replayed);
  CHECK(contains(r.skip_reason, "live table"));
}

TEST_CASE("threads record into one ring") {
  event_ring ring(8192);  // a live table of 16,384 blocks: room for the 10,000 left live
  constexpr int threads = 4;
  constexpr std::uintptr_t per_thread = 5000;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&ring, t] {
      const std::uintptr_t base = (static_cast<std::uintptr_t>(t) + 1) << 32;
      for (std::uintptr_t i = 0; i < per_thread; ++i) {
        ring.record_alloc(addr(base + i * 0x200), 512, stream0);
        if (i % 2 == 1) ring.record_free(addr(base + (i - 1) * 0x200), 512, stream0);
      }
    });
  }
  std::thread reader([&ring] {
    for (int i = 0; i < 20; ++i) (void)ring.snapshot();
  });
  for (auto& th : pool) th.join();
  reader.join();
  const ring_window w = ring.snapshot();
  CHECK_EQ(w.recorded, threads * (per_thread + per_thread / 2));
  CHECK(w.live_known);
  std::int64_t now = static_cast<std::int64_t>(sum_live(w));
  for (const auto& e : w.events) now += e.action == ring_action::alloc ? 512 : -512;
  CHECK_EQ(now, static_cast<std::int64_t>(threads * per_thread / 2 * 512));
}

TEST_CASE("fragmentation: pool would not have fit at the capacity, expandable would") {
  event_ring ring(1024);
  fragment(ring);
  const ring_window w = ring.snapshot();
  const oom_report r = make_oom_report(context_at(64 * MiB, 2 * MiB, 50 * MiB), &w);
  CHECK_EQ(r.verdict, oom_verdict::fragmentation);
  REQUIRE(r.replayed);
  CHECK_EQ(r.window_events, 3u);
  CHECK_EQ(r.live_blocks, 0u);
  const auto* pool = outcome(r, "pool");
  const auto* expandable = outcome(r, "expandable");
  REQUIRE(pool != nullptr);
  REQUIRE(expandable != nullptr);
  CHECK(pool->finished);
  CHECK_FALSE(pool->fits);
  CHECK_FALSE(pool->request_fits);
  CHECK(expandable->fits);
  CHECK_LE(expandable->peak_reserved_bytes, 64 * MiB);
  const std::string text = r.text();
  CHECK(contains(text, "Fragmentation:"));
  CHECK(contains(text, "expandable would have fit"));
  CHECK(contains(text, "pool would not"));
  CHECK(contains(text, "Try GPUMEM_ALLOCATOR=expandable."));
  const std::string json = r.json();
  CHECK(contains(json, "\"verdict\":\"fragmentation\""));
  CHECK(contains(json, "\"replayed\":true"));
  CHECK(contains(json, "\"skipReason\":null"));

  // With twice the capacity pool fits too: the verdict came from the capacity, not the strategy.
  const oom_report roomy = make_oom_report(context_at(128 * MiB, 2 * MiB, 50 * MiB), &w);
  CHECK(outcome(roomy, "pool")->fits);
}

TEST_CASE("a window that starts mid-run seeds the blocks live before it") {
  event_ring ring(3);
  for (std::uintptr_t i = 0; i < 10; ++i) ring.record_alloc(addr(0x80000000 + i * 0x200000), 2 * MiB, stream0);
  ring.record_free(addr(0x80000000), 2 * MiB, stream0);
  ring.record_alloc(addr(0x80000000), 2 * MiB, stream0);
  fragment(ring);  // the window: its three events
  const ring_window w = ring.snapshot();
  REQUIRE(w.overflowed);
  const oom_report r = make_oom_report(context_at(84 * MiB, 22 * MiB, 50 * MiB), &w);
  REQUIRE(r.replayed);
  CHECK_EQ(r.window_events, 3u);
  CHECK_EQ(r.live_blocks, 10u);
  CHECK_EQ(r.live_block_bytes, 20 * MiB);
  CHECK_FALSE(outcome(r, "pool")->fits);
  CHECK(outcome(r, "expandable")->fits);
  CHECK(contains(r.text(), "Replayed the last 3 events over 10 blocks live before them"));
}

TEST_CASE("fragmentation made before the window: the replay says the failing strategy fits") {
  event_ring ring(8);
  fragment_both(ring);
  const ring_window w = ring.snapshot();
  REQUIRE(w.overflowed);
  const oom_report r = make_oom_report(context_at(64 * MiB, 30 * MiB, 8 * MiB), &w);
  REQUIRE(r.replayed);
  CHECK_EQ(r.window_events, 8u);
  // The window is the last 8 frees; before them 23 blocks of 2 MiB were live (15 stay live, 8 are freed in it).
  CHECK_EQ(r.live_blocks, 23u);
  CHECK_EQ(r.live_block_bytes, 46 * MiB);
  // Seeded packed, pool fits: the fragmentation was made before the window, and the report says so.
  CHECK(outcome(r, "pool")->fits);
  CHECK(contains(r.text(), "pool itself fits in the replay"));
}

TEST_CASE("fragmentation no strategy avoids: neither fits, no advice") {
  event_ring ring(1024);
  fragment_both(ring);
  const ring_window w = ring.snapshot();
  const oom_report r = make_oom_report(context_at(64 * MiB, 30 * MiB, 8 * MiB), &w);
  CHECK_EQ(r.verdict, oom_verdict::fragmentation);
  REQUIRE(r.replayed);
  CHECK_EQ(r.window_events, 47u);
  CHECK_FALSE(outcome(r, "pool")->fits);
  CHECK_FALSE(outcome(r, "expandable")->fits);
  CHECK(contains(r.text(), "pool would not; expandable would not; caching would not."));
  CHECK_FALSE(contains(r.text(), "Try"));
}

TEST_CASE("real: the live bytes and the request exceed the capacity") {
  event_ring ring(1024);
  fragment(ring);
  const ring_window w = ring.snapshot();
  const oom_report r = make_oom_report(context_at(36 * MiB, 30 * MiB, 8 * MiB), &w);  // 38 MiB > 36 MiB
  CHECK_EQ(r.verdict, oom_verdict::real);
  CHECK_FALSE(r.replayed);
  CHECK(contains(r.skip_reason, "exceed the capacity"));
  CHECK(contains(r.text(), "Real: the live bytes (30.00 MiB) and the request (8.00 MiB) exceed the capacity by 2.00 MiB"));
  CHECK(contains(r.json(), "\"verdict\":\"real\""));
}

TEST_CASE("skip reasons: the ring off, a time bound of 0, no capacity") {
  event_ring ring(1024);
  fragment(ring);
  const ring_window w = ring.snapshot();

  oom_context off = context_at(64 * MiB, 30 * MiB, 8 * MiB);
  off.window = 0;
  const oom_report r_off = make_oom_report(off, nullptr);
  CHECK_EQ(r_off.verdict, oom_verdict::fragmentation);  // the verdict needs no replay
  CHECK_FALSE(r_off.replayed);
  CHECK(contains(r_off.skip_reason, "GPUMEM_OOM_WINDOW=0"));
  CHECK(contains(r_off.text(), "No replay: the event ring is off (GPUMEM_OOM_WINDOW=0)."));

  oom_context no_time = context_at(64 * MiB, 30 * MiB, 8 * MiB);
  no_time.replay_ms = 0;
  const oom_report r_time = make_oom_report(no_time, &w);
  CHECK_FALSE(r_time.replayed);
  CHECK(contains(r_time.skip_reason, "GPUMEM_OOM_REPLAY_MS=0"));
  CHECK(r_time.strategies.empty());

  const oom_report r_unknown = make_oom_report(context_at(0, 30 * MiB, 8 * MiB), &w);
  CHECK_EQ(r_unknown.verdict, oom_verdict::unknown);
  CHECK_FALSE(r_unknown.replayed);
  CHECK(contains(r_unknown.json(), "\"capacityBytes\":null"));
}

TEST_CASE("the time bound stops the replay, and the ring's copy counts against it") {
  event_ring ring(1024);
  fragment(ring);
  ring_window w = ring.snapshot();
  CHECK_GE(w.copy_ms, 0.0);
  w.copy_ms = 5;  // a copy that took longer than the whole bound
  oom_context c = context_at(64 * MiB, 2 * MiB, 50 * MiB);
  c.replay_ms = 1;
  const oom_report r = make_oom_report(c, &w);
  CHECK_EQ(r.verdict, oom_verdict::fragmentation);
  CHECK_FALSE(r.replayed);
  CHECK_EQ(r.skip_reason, "the time bound of 1 ms (GPUMEM_OOM_REPLAY_MS) ran out");
  REQUIRE_EQ(r.strategies.size(), gpumem::torch::replayed_strategies().size());
  for (const auto& o : r.strategies) {
    CAPTURE(o.strategy);
    CHECK_FALSE(o.finished);
    CHECK_FALSE(o.fits);
  }
  CHECK_GE(r.replay_ms, 5.0);
  CHECK(contains(r.text(), "No replay: the time bound of 1 ms (GPUMEM_OOM_REPLAY_MS) ran out."));
}

TEST_CASE("the twins take no memory and cap at the capacity") {
  // 1 TiB through each twin: nothing is committed (a host twin would need the memory).
  for (const std::string& name : gpumem::torch::replayed_strategies()) {
    CAPTURE(name);
    gpumem::torch::replay_twin t = gpumem::torch::make_replay_twin(name, std::uint64_t{1} << 40, nullptr);
    void* p = t.top().allocate(std::size_t{512} << 30, nullptr);
    CHECK_THROWS_AS(t.top().allocate(std::size_t{600} << 30, nullptr), gpumem::out_of_memory);
    t.top().deallocate(p, std::size_t{512} << 30, nullptr);
  }
  CHECK_THROWS_AS(gpumem::torch::make_replay_twin("async", MiB, nullptr), gpumem::invalid_argument);
}

TEST_CASE("the registry says which strategies replay, with the process's own options") {
  // The device strategies with an address-only twin, in the registry's order; async says why not.
  CHECK(gpumem::torch::replayed_strategies() == std::vector<std::string>{"pool", "expandable", "caching"});
  const oom_report r = make_oom_report(context_at(0, MiB, MiB), nullptr);
  REQUIRE_EQ(r.not_replayed.size(), 1u);
  CHECK(contains(r.not_replayed[0], "async: cudaMallocAsync's pool is the driver's"));
  // A pool configured with a cap of its own (maxReservedBytes) replays with it.
  gpumem::chain_spec own;
  own.strategy = "pool";
  own.options<gpumem::pool_spec>().options.max_reserved_bytes = 8 * MiB;
  gpumem::torch::replay_twin capped = gpumem::torch::make_replay_twin("pool", 64 * MiB, &own);
  CHECK_THROWS_AS(capped.top().allocate(16 * MiB, nullptr), gpumem::out_of_memory);
  gpumem::torch::replay_twin plain = gpumem::torch::make_replay_twin("pool", 64 * MiB, nullptr);
  void* p = plain.top().allocate(16 * MiB, nullptr);
  plain.top().deallocate(p, 16 * MiB, nullptr);
}

TEST_CASE("GPUMEM_OOM_WINDOW and GPUMEM_OOM_REPLAY_MS") {
  auto parse = [](const char* window, const char* ms, gpumem::torch::config& c, std::string& error) {
    return gpumem::torch::parse_config(
        [&](const char* name) -> const char* {
          if (std::string(name) == "GPUMEM_OOM_WINDOW") return window;
          if (std::string(name) == "GPUMEM_OOM_REPLAY_MS") return ms;
          return nullptr;
        },
        c, error);
  };
  gpumem::torch::config c;
  std::string error;
  REQUIRE(parse(nullptr, nullptr, c, error));
  CHECK_EQ(c.oom_window, gpumem::torch::default_oom_window);
  CHECK_EQ(c.oom_replay_ms, gpumem::torch::default_oom_replay_ms);
  REQUIRE(parse("0", "1000", c, error));
  CHECK_EQ(c.oom_window, 0u);
  CHECK_EQ(c.oom_replay_ms, 1000u);
  REQUIRE(parse("1048576", "60000", c, error));
  CHECK_EQ(c.oom_window, 1048576u);
  for (const char* bad : {"-1", "64KiB", "1048577", " 5", "1e3", "99999999999999999999999"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse(bad, nullptr, c, error));
    CHECK(contains(error, std::string("GPUMEM_OOM_WINDOW='") + bad + "' is not valid: expected a number of events from 0 (off) to 1048576"));
  }
  CHECK_FALSE(parse(nullptr, "60001", c, error));
  CHECK(contains(error, "GPUMEM_OOM_REPLAY_MS='60001' is not valid: expected milliseconds from 0 (no replay) to 60000"));
  const auto& vars = gpumem::torch::config_variables();
  CHECK(std::find(vars.begin(), vars.end(), "GPUMEM_OOM_WINDOW") != vars.end());
  CHECK(std::find(vars.begin(), vars.end(), "GPUMEM_OOM_REPLAY_MS") != vars.end());
}
