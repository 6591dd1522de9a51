// Sleep and wake by tag in expandable_resource on the host twin (mmap): a tag's ranges give their
// physical memory back and map it again at the same addresses with the kept content, frees and
// refused allocations while asleep, a device or a host too short, and tags of two threads in runs of
// their own.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "../src/core/resources/sleep_engine.hpp"  // pin_chunk_bytes
#include "byte_pattern.hpp"
#include "expandable_test_support.hpp"
#include "fake_ordering.hpp"
#include "gpumem/chain_builder.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/expandable_resource.hpp"
#include "gpumem/vmm.hpp"
#include "gpumem/sleep.hpp"
#include "gpumem/strategy_registry.hpp"
#include "gpumem/stream_ordering.hpp"
#include "pool_test_support.hpp"
#include "sleep_test_support.hpp"

using namespace gpumem;
using namespace gpumem::test;

namespace {

// An expandable resource over the host twin with 64 KiB granules and a 64 MiB range per stream and
// tag (a test that needs a smaller device passes a make_limited_vmm of the twin).
using fixture = expandable_fixture;

// Tags are per process: each test names its own, so that no test sees another's.
const tag_id weights = intern_tag("sleep-test-weights");
const tag_id kv = intern_tag("sleep-test-kv");

sleep_request only(std::vector<tag_id> tags, bool keep = true) {
  sleep_request r;
  r.tags = std::move(tags);
  r.keep_all = keep;
  return r;
}

}  // namespace

TEST_CASE("a kept tag wakes at the same addresses with its content") {
  fixture f;
  const tag_id t = intern_tag("sleep-test-keep");
  void* a = allocate_in(f.resource, t, 1000);
  void* b = allocate_in(f.resource, t, 3 * granule + 100);  // across granules, partly in a's run
  fill(a, 1000, 1);
  fill(b, 3 * granule + 100, 2);
  const resource_stats before = f.resource.stats();
  CHECK_EQ(before.reserved_bytes, 4 * granule);

  const sleep_report slept = f.resource.sleep(only({t}));
  CHECK_EQ(slept.changed, std::vector<tag_id>{t});
  CHECK(slept.unchanged.empty());
  CHECK_EQ(slept.device_bytes, 4 * granule);
  CHECK_EQ(slept.copied_bytes, 1000 + 3 * granule + 100);
  resource_stats s = f.resource.stats();
  CHECK_EQ(s.reserved_bytes, 0u);
  CHECK_EQ(s.allocated_bytes, before.allocated_bytes);  // the blocks are still the caller's
  CHECK_EQ(s.peak_reserved_bytes, before.peak_reserved_bytes);
  CHECK_EQ(s.largest_free_block, 0);
  CHECK_EQ(f.resource.idle_bytes(), 0u);
  tag_state st = state_of(f.resource, t);
  CHECK(st.asleep);
  CHECK_EQ(st.mode, sleep_mode::keep);
  CHECK_EQ(st.allocated_bytes, 1000 + 3 * granule + 100);
  CHECK_EQ(st.device_bytes, 0u);
  CHECK_EQ(st.slept_bytes, 4 * granule);
  CHECK_GE(st.backup_bytes, slept.copied_bytes);

  const sleep_report woke = f.resource.wake({t});
  CHECK_EQ(woke.changed, std::vector<tag_id>{t});
  CHECK_EQ(woke.device_bytes, 4 * granule);
  CHECK_EQ(woke.copied_bytes, slept.copied_bytes);
  CHECK(intact(a, 1000, 1));
  CHECK(intact(b, 3 * granule + 100, 2));
  s = f.resource.stats();
  CHECK_EQ(s.reserved_bytes, 4 * granule);
  CHECK_EQ(s.peak_reserved_bytes, before.peak_reserved_bytes);
  st = state_of(f.resource, t);
  CHECK(!st.asleep);
  CHECK_EQ(st.device_bytes, 4 * granule);
  CHECK_EQ(st.slept_bytes, 0u);
  CHECK_EQ(st.backup_bytes, 0u);
  CHECK_GE(f.resource.backup_pool_bytes(), slept.copied_bytes);  // kept for the next sleep
  f.resource.trim_backup();
  CHECK_EQ(f.resource.backup_pool_bytes(), 0u);

  // Awake again: the blocks free and the range serves as before.
  f.resource.deallocate(a, 1000);
  void* c = allocate_in(f.resource, t, 1000);
  CHECK_EQ(c, a);
  f.resource.deallocate(c, 1000);
  f.resource.deallocate(b, 3 * granule + 100);
  CHECK_EQ(f.resource.stats().allocated_bytes, 0u);
  CHECK_EQ(f.resource.idle_bytes(), 4 * granule);
}

TEST_CASE("a discarded tag keeps its addresses and holds no device memory while asleep") {
  fixture f;
  const tag_id scratch = intern_tag("sleep-test-scratch");
  const tag_id kept = intern_tag("sleep-test-kept");
  void* s = allocate_in(f.resource, scratch, 2 * granule);
  void* k = allocate_in(f.resource, kept, granule);
  fill(k, granule, 3);
  CHECK_EQ(f.resource.stats().reserved_bytes, 3 * granule);

  sleep_request request;  // every tag; only `kept` keeps
  request.keep_all = false;
  request.keep = {kept};
  const sleep_report slept = f.resource.sleep(request);
  CHECK_EQ(slept.changed.size(), 2u);
  CHECK_EQ(slept.copied_bytes, granule);
  CHECK_EQ(f.resource.stats().reserved_bytes, 0u);
  const tag_state st = state_of(f.resource, scratch);
  CHECK(st.asleep);
  CHECK_EQ(st.mode, sleep_mode::discard);
  CHECK_EQ(st.device_bytes, 0u);
  CHECK_EQ(st.backup_bytes, 0u);
  CHECK_EQ(st.slept_bytes, 2 * granule);

  const sleep_report woke = f.resource.wake({});
  CHECK_EQ(woke.changed.size(), 2u);
  CHECK_EQ(woke.copied_bytes, granule);
  CHECK_EQ(f.resource.stats().reserved_bytes, 3 * granule);
  std::memset(s, 0x5A, 2 * granule);  // mapped again at the same address: writable
  CHECK(intact(k, granule, 3));
  f.resource.deallocate(s, 2 * granule);
  f.resource.deallocate(k, granule);
}

TEST_CASE("sleeping every tag releases every mapped byte, the idle runs included") {
  fixture f;
  void* a = allocate_in(f.resource, weights, granule);
  void* gap = allocate_in(f.resource, weights, 2 * granule);
  void* b = allocate_in(f.resource, weights, granule);
  void* c = allocate_in(f.resource, kv, 5 * granule);
  f.resource.deallocate(gap, 2 * granule);  // its run stays mapped, idle
  void* d = allocate_in(f.resource, kv, granule, stream_a);
  f.resource.deallocate(d, granule, stream_a);  // a whole idle range of stream_a's
  CHECK_EQ(f.resource.stats().reserved_bytes, 10 * granule);
  CHECK_EQ(f.resource.idle_bytes(), 3 * granule);
  const std::size_t ranges = f.resource.range_count();
  CHECK_EQ(ranges, 3u);

  const sleep_report slept = f.resource.sleep({});
  CHECK_EQ(slept.device_bytes, 10 * granule);
  const resource_stats s = f.resource.stats();
  CHECK_EQ(s.reserved_bytes, 0u);
  CHECK_EQ(s.segment_count, 0u);
  CHECK_EQ(f.resource.idle_bytes(), 0u);
  CHECK_EQ(f.resource.range_count(), ranges);  // the addresses stay reserved
  f.resource.trim(0);                          // nothing mapped: nothing to do
  CHECK_EQ(f.resource.stats().reserved_bytes, 0u);

  // Only the runs in use come back; the idle ones were forgotten.
  const sleep_report woke = f.resource.wake({});
  CHECK_EQ(woke.device_bytes, 7 * granule);
  CHECK_EQ(f.resource.stats().reserved_bytes, 7 * granule);
  CHECK_EQ(f.resource.idle_bytes(), 0u);
  void* again = allocate_in(f.resource, weights, 2 * granule);  // the hole maps again
  CHECK_EQ(again, gap);
  std::memset(again, 1, 2 * granule);
  for (auto [p, n] :
       {std::pair{a, granule}, std::pair{again, 2 * granule}, std::pair{b, granule}, std::pair{c, 5 * granule}}) {
    f.resource.deallocate(p, n);
  }
  CHECK_EQ(f.resource.stats().allocated_bytes, 0u);
}

TEST_CASE("a free while asleep drops the block's copy and wake maps only what is still in use") {
  fixture f;
  const tag_id t = intern_tag("sleep-test-free");
  void* lone = allocate_in(f.resource, t, 2 * granule);  // a run of its own
  void* x = allocate_in(f.resource, t, 1000);            // x and y share a run
  void* y = allocate_in(f.resource, t, 1000);
  fill(x, 1000, 4);
  fill(y, 1000, 5);
  CHECK_EQ(f.resource.stats().reserved_bytes, 3 * granule);
  f.resource.sleep(only({t}));

  f.resource.deallocate(lone, 2 * granule);
  f.resource.deallocate(x, 1000, stream_b);  // another stream's free: fine too
  tag_state st = state_of(f.resource, t);
  CHECK(st.asleep);
  CHECK_EQ(st.allocated_bytes, 1000u);
  CHECK_EQ(f.resource.stats().allocated_bytes, 1000u);
  CHECK_EQ(f.resource.stats().reserved_bytes, 0u);
  CHECK_EQ(f.resource.idle_bytes(), 0u);

  const sleep_report woke = f.resource.wake({t});
  CHECK_EQ(woke.copied_bytes, 1000u);    // y only
  CHECK_EQ(woke.device_bytes, granule);  // the run under y; lone's run held nothing any more
  CHECK(intact(y, 1000, 5));
  CHECK_EQ(f.resource.stats().reserved_bytes, granule);
  CHECK_EQ(f.resource.idle_bytes(), 0u);  // y pins its granule

  // The allocator is whole: the freed places serve again.
  void* l2 = allocate_in(f.resource, t, 2 * granule);
  CHECK_EQ(l2, lone);
  std::memset(l2, 7, 2 * granule);
  void* x2 = allocate_in(f.resource, t, 1000);
  CHECK_EQ(x2, x);
  f.resource.deallocate(l2, 2 * granule);
  f.resource.deallocate(x2, 1000);
  f.resource.deallocate(y, 1000);
  CHECK_EQ(f.resource.stats().allocated_bytes, 0u);
  CHECK_EQ(f.resource.idle_bytes(), 3 * granule);
}

TEST_CASE("a parked block is not saved, and its run is forgotten once its events complete while asleep") {
  fixture f;
  const tag_id t = intern_tag("sleep-test-parked");
  void* p = allocate_in(f.resource, t, granule);  // a run each
  void* q = allocate_in(f.resource, t, granule);
  fill(q, granule, 10);
  f.resource.record_stream(p, stream_b);
  f.resource.deallocate(p, granule);
  CHECK_EQ(f.resource.pending_free_blocks(), 1u);

  const sleep_report slept = f.resource.sleep(only({t}));
  CHECK_EQ(slept.copied_bytes, granule);  // q; p was freed
  CHECK_EQ(slept.device_bytes, 2 * granule);
  CHECK_EQ(f.resource.pending_free_blocks(), 1u);
  f.log->complete_all();
  CHECK_EQ(f.resource.pending_free_blocks(), 0u);  // p is free now, its run forgotten
  CHECK_EQ(f.resource.stats().reserved_bytes, 0u);

  CHECK_EQ(f.resource.wake({t}).device_bytes, granule);
  CHECK(intact(q, granule, 10));
  void* again = allocate_in(f.resource, t, granule);
  CHECK_EQ(again, p);
  std::memset(again, 1, granule);
  CHECK_EQ(f.resource.stats().reserved_bytes, 2 * granule);
  f.resource.deallocate(again, granule);
  f.resource.deallocate(q, granule);
}

TEST_CASE("an allocation in a sleeping tag is refused and changes nothing") {
  fixture f;
  const tag_id t = intern_tag("sleep-test-refuse");
  void* p = allocate_in(f.resource, t, granule);
  f.resource.sleep(only({t}));
  const resource_stats before = f.resource.stats();
  const std::size_t ranges = f.resource.range_count();
  CHECK_THROWS_WITH_AS(allocate_in(f.resource, t, 100), doctest::Contains("'sleep-test-refuse' is asleep"),
                       invalid_state);
  CHECK_THROWS_AS(allocate_in(f.resource, t, 100, stream_c), invalid_state);  // a stream with no range yet
  const resource_stats after = f.resource.stats();
  CHECK_EQ(after.allocated_bytes, before.allocated_bytes);
  CHECK_EQ(after.reserved_bytes, before.reserved_bytes);
  CHECK_EQ(after.alloc_count, before.alloc_count);
  CHECK_EQ(after.oom_count, before.oom_count);
  CHECK_EQ(f.resource.range_count(), ranges);
  CHECK(state_of(f.resource, t).asleep);
  // Other tags allocate as usual.
  void* other = allocate_in(f.resource, kv, 100);
  f.resource.deallocate(other, 100);
  f.resource.wake({t});
  f.resource.deallocate(p, granule);
}

TEST_CASE("unknown tags are refused by name; asleep and awake tags named again are unchanged") {
  fixture f;
  const tag_id t = intern_tag("sleep-test-known");
  const tag_id stranger = intern_tag("sleep-test-stranger");
  void* p = allocate_in(f.resource, t, 100);
  CHECK_THROWS_WITH_AS(f.resource.sleep(only({stranger})),
                       doctest::Contains("'sleep-test-stranger'; the tags it knows: 'sleep-test-known'"),
                       invalid_argument);
  CHECK_THROWS_AS(f.resource.wake({stranger}), invalid_argument);
  sleep_request keep_unknown;
  keep_unknown.keep_all = false;
  keep_unknown.keep = {stranger};
  CHECK_THROWS_AS(f.resource.sleep(keep_unknown), invalid_argument);
  CHECK(!state_of(f.resource, t).asleep);

  sleep_report r = f.resource.wake({t});  // awake already
  CHECK(r.changed.empty());
  CHECK_EQ(r.unchanged, std::vector<tag_id>{t});
  f.resource.sleep(only({t}));
  r = f.resource.sleep(only({t}));  // asleep already
  CHECK(r.changed.empty());
  CHECK_EQ(r.unchanged, std::vector<tag_id>{t});
  CHECK_EQ(r.device_bytes, 0u);
  r = f.resource.wake({});
  CHECK_EQ(r.changed, std::vector<tag_id>{t});
  f.resource.deallocate(p, 100);
}

TEST_CASE("a wake the device has no room for fails with the tag still asleep, and succeeds once there is") {
  fixture f(make_limited_vmm(make_host_vmm(granule), 8 * granule));  // a smaller device
  void* w = allocate_in(f.resource, weights, 4 * granule);
  fill(w, 4 * granule, 6);
  f.resource.sleep(only({weights}));
  void* k = allocate_in(f.resource, kv, 6 * granule);  // the room weights left, and more
  const resource_stats before = f.resource.stats();
  CHECK_EQ(before.reserved_bytes, 6 * granule);

  CHECK_THROWS_WITH_AS(f.resource.wake({weights}), doctest::Contains("waking tag 'sleep-test-weights'"), out_of_memory);
  tag_state st = state_of(f.resource, weights);
  CHECK(st.asleep);
  CHECK_GE(st.backup_bytes, 4 * granule);
  const resource_stats after = f.resource.stats();
  CHECK_EQ(after.reserved_bytes, before.reserved_bytes);  // what the failed wake mapped went again
  CHECK_EQ(after.segment_count, before.segment_count);
  CHECK_EQ(after.oom_count, before.oom_count + 1);

  f.resource.deallocate(k, 6 * granule);  // idle: the wake releases it
  const sleep_report woke = f.resource.wake({weights});
  CHECK_EQ(woke.changed, std::vector<tag_id>{weights});
  CHECK(intact(w, 4 * granule, 6));
  CHECK_EQ(f.resource.stats().reserved_bytes, 4 * granule);
  CHECK(!state_of(f.resource, weights).asleep);
  f.resource.deallocate(w, 4 * granule);
}

TEST_CASE("a host too short for the backups fails the sleep before anything is released") {
  expandable_options o = small_range();
  o.backup_limit_bytes = 4 * KiB;
  fixture f(make_host_vmm(granule), o);
  const tag_id t = intern_tag("sleep-test-host-short");
  void* p = allocate_in(f.resource, t, 2 * granule);
  void* idle = allocate_in(f.resource, t, granule);
  f.resource.deallocate(idle, granule);  // an idle run, which a sleep would release too
  fill(p, 2 * granule, 8);
  const resource_stats before = f.resource.stats();

  CHECK_THROWS_WITH_AS(f.resource.sleep(only({t})), doctest::Contains("backupLimitBytes"), out_of_memory);
  CHECK_EQ(f.resource.stats().reserved_bytes, before.reserved_bytes);
  CHECK_EQ(f.resource.idle_bytes(), granule);
  CHECK(!state_of(f.resource, t).asleep);
  CHECK(intact(p, 2 * granule, 8));
  CHECK_EQ(f.resource.backup_pool_bytes(), 0u);

  // A tag that discards needs no host memory.
  const sleep_report r = f.resource.sleep(only({t}, false));
  CHECK_EQ(r.changed, std::vector<tag_id>{t});
  CHECK_EQ(f.resource.stats().reserved_bytes, 0u);
  f.resource.wake({});
  f.resource.deallocate(p, 2 * granule);
}

TEST_CASE("the tags of two threads' scopes go to ranges of their own") {
  fixture f;
  const tag_id left = intern_tag("sleep-test-left");
  const tag_id right = intern_tag("sleep-test-right");
  void* a = nullptr;
  void* b = nullptr;
  std::thread one([&] {
    tag_scope scope(left);
    a = f.resource.allocate(1000);
  });
  std::thread two([&] {
    tag_scope scope(right);
    b = f.resource.allocate(1000);
  });
  one.join();
  two.join();
  CHECK_EQ(f.resource.range_count(), 2u);
  const std::uintptr_t distance = addr(a) > addr(b) ? addr(a) - addr(b) : addr(b) - addr(a);
  CHECK_GE(distance, 64 * MiB);  // not in one range, so never in one run
  CHECK_EQ(state_of(f.resource, left).allocated_bytes, 1000u);
  CHECK_EQ(state_of(f.resource, right).allocated_bytes, 1000u);

  // Sleeping one leaves the other mapped.
  fill(b, 1000, 9);
  f.resource.sleep(only({left}, false));
  CHECK(intact(b, 1000, 9));
  CHECK_EQ(state_of(f.resource, right).device_bytes, granule);
  CHECK_EQ(f.resource.stats().reserved_bytes, granule);
  f.resource.wake({left});
  f.resource.deallocate(a, 1000);
  f.resource.deallocate(b, 1000);
}

TEST_CASE("the process tag is the tag where a thread sets none") {
  fixture f;
  const tag_id t = intern_tag("sleep-test-process");
  const tag_id previous = set_process_tag(t);
  void* p = f.resource.allocate(100);
  set_process_tag(previous);
  void* q = f.resource.allocate(100);
  CHECK_EQ(f.resource.range_count(), 2u);
  CHECK_EQ(state_of(f.resource, t).allocated_bytes, 100u);
  CHECK_EQ(state_of(f.resource, default_tag).allocated_bytes, 100u);
  f.resource.deallocate(p, 100);
  f.resource.deallocate(q, 100);
}

TEST_CASE("a destroyed stream's range of a sleeping tag goes once its blocks are freed") {
  fixture f;
  const tag_id t = intern_tag("sleep-test-retired");
  void* p = allocate_in(f.resource, t, granule, stream_d);
  void* q = allocate_in(f.resource, t, granule);
  f.resource.sleep(only({t}));
  notify_stream_destroyed(stream_d);
  CHECK_EQ(f.resource.range_count(), 2u);
  f.resource.deallocate(p, granule, stream_d);
  CHECK_EQ(f.resource.range_count(), 1u);
  CHECK_EQ(f.resource.wake({t}).device_bytes, granule);
  f.resource.deallocate(q, granule);
}

TEST_CASE("a resource destroyed while tags sleep gives everything back") {
  fixture f;
  const tag_id t = intern_tag("sleep-test-destroyed");
  allocate_in(f.resource, t, 3 * granule);  // never freed: the destructor's
  allocate_in(f.resource, kv, granule);
  f.resource.sleep(only({t}));
  CHECK_EQ(f.resource.stats().reserved_bytes, granule);
}

TEST_CASE("the 'expandable' strategy is sleepable and takes backupLimitBytes") {
  const strategy_descriptor& d = parse_strategy("expandable");
  CHECK(d.flags.sleep);
  const auto o =
      std::find_if(d.options.begin(), d.options.end(), [](const auto& x) { return x.key == "backupLimitBytes"; });
  REQUIRE(o != d.options.end());
  CHECK(o->kind == option_kind::bytes);
  CHECK(o->default_text.empty());  // unset

  chain_spec spec;
  spec.strategy = "expandable";
  spec.options<expandable_spec>().backing = placement::host;
  spec.options<expandable_spec>().options.reserve_bytes = 64 * MiB;
  option_value limit;
  REQUIRE(parse_option_text(*o, "4KiB", limit));
  o->apply(spec, limit);
  CHECK_EQ(spec.options<expandable_spec>().options.backup_limit_bytes, std::optional<std::uint64_t>(4 * KiB));

  resource_chain chain = build_chain(spec);
  REQUIRE(chain.sleeper != nullptr);
  auto* leaf = dynamic_cast<expandable_resource*>(chain.layers.front().get());
  REQUIRE(leaf != nullptr);
  CHECK(chain.sleeper == static_cast<sleepable*>(leaf));
  const tag_id t = intern_tag("sleep-test-chain");
  void* p = allocate_in(chain.top(), t, 100);
  CHECK_THROWS_WITH_AS(chain.sleeper->sleep(only({t})), doctest::Contains("backupLimitBytes"), out_of_memory);
  CHECK_EQ(chain.sleeper->sleep(only({t}, false)).changed, std::vector<tag_id>{t});
  chain.sleeper->wake({});
  chain.top().deallocate(p, 100);
}

TEST_CASE("read_backup copies a sleeping kept block's content, and nothing where none is kept") {
  fixture f;
  const tag_id kept = intern_tag("sleep-test-read-kept");
  const tag_id dropped = intern_tag("sleep-test-read-dropped");
  const std::size_t n = 3 * granule + 100;
  void* a = allocate_in(f.resource, kept, n);
  void* d = allocate_in(f.resource, dropped, 1000);
  fill(a, n, 7);
  std::vector<std::byte> out(n);
  CHECK(!f.resource.read_backup(a, n, out.data()));  // awake: no backup

  sleep_request request;
  request.keep_all = false;
  request.keep = {kept};
  f.resource.sleep(request);
  CHECK(f.resource.read_backup(a, n, out.data()));
  CHECK(intact(out.data(), n, 7));
  std::vector<std::byte> part(500);
  CHECK(f.resource.read_backup(static_cast<std::byte*>(a) + granule, part.size(), part.data()));
  CHECK(std::memcmp(part.data(), out.data() + granule, part.size()) == 0);
  CHECK(!f.resource.read_backup(a, n + 1, out.data()));  // past the block: not all of it was saved
  CHECK(!f.resource.read_backup(d, 1000, out.data()));   // discarded
  CHECK(!f.resource.read_backup(a, 0, out.data()));

  f.resource.wake({});
  CHECK(!f.resource.read_backup(a, n, out.data()));  // awake again: the backup went back to the pool
  f.resource.deallocate(a, n);
  f.resource.deallocate(d, 1000);
}

TEST_CASE("keep_cache: the idle runs sleep with the tag and wake maps them again, a free while asleep forgetting none") {
  fixture f;
  const tag_id t = intern_tag("sleep-test-keep-cache");
  void* a = allocate_in(f.resource, t, granule);
  void* gap = allocate_in(f.resource, t, 2 * granule);
  void* b = allocate_in(f.resource, t, granule);
  fill(a, granule, 3);
  f.resource.deallocate(gap, 2 * granule);  // its run stays mapped, idle (a graph's freed intermediates)
  CHECK_EQ(f.resource.stats().reserved_bytes, 4 * granule);
  CHECK_EQ(f.resource.idle_bytes(), 2 * granule);

  sleep_request request = only({t});
  request.keep_cache = true;
  const sleep_report slept = f.resource.sleep(request);
  CHECK_EQ(slept.device_bytes, 4 * granule);
  CHECK_EQ(slept.copied_bytes, granule + granule);  // the live blocks only
  CHECK_EQ(f.resource.stats().reserved_bytes, 0u);
  CHECK_EQ(f.resource.idle_bytes(), 0u);
  f.resource.deallocate(b, granule);  // a free while asleep: its run becomes idle and stays known
  f.resource.trim(0);                 // no release looks at a sleeping range

  const sleep_report woke = f.resource.wake({t});
  CHECK_EQ(woke.device_bytes, 4 * granule);  // everything the tag held, its cache included
  CHECK_EQ(f.resource.stats().reserved_bytes, 4 * granule);
  CHECK_EQ(f.resource.idle_bytes(), 3 * granule);
  CHECK(intact(a, granule, 3));
  std::memset(gap, 9, 2 * granule);  // the cached memory is mapped: writable without an allocation
  void* again = allocate_in(f.resource, t, 2 * granule);
  CHECK_EQ(again, gap);

  // Without keep_cache the next sleep forgets the idle runs, as before.
  f.resource.sleep(only({t}));
  CHECK_EQ(f.resource.wake({t}).device_bytes, 3 * granule);
  f.resource.deallocate(again, 2 * granule);
  f.resource.deallocate(a, granule);
  CHECK_EQ(f.resource.stats().allocated_bytes, 0u);
}

TEST_CASE("retain_backup: a woken tag keeps its backup readable, and its next sleep reuses the same host memory") {
  fixture f;
  const tag_id t = intern_tag("sleep-test-retain");
  const std::size_t n = 3 * granule + 100;
  void* a = allocate_in(f.resource, t, n);
  void* c = allocate_in(f.resource, t, 1000);
  fill(a, n, 11);
  fill(c, 1000, 12);
  CHECK(f.resource.backup_view(a, n) == nullptr);  // awake, nothing kept

  f.resource.sleep(only({t}));
  const void* first = f.resource.backup_view(a, n);
  REQUIRE(first != nullptr);
  CHECK(intact(first, n, 11));
  CHECK(f.resource.backup_view(a, n + 1) == nullptr);  // past the block

  const sleep_report woke = f.resource.wake({t}, true);
  CHECK_EQ(woke.copied_bytes, n + 1000);
  CHECK(intact(a, n, 11));
  CHECK_EQ(f.resource.backup_view(a, n), first);  // awake, retained, at the same place
  std::vector<std::byte> out(n);
  CHECK(f.resource.read_backup(a, n, out.data()));
  CHECK(intact(out.data(), n, 11));
  CHECK(state_of(f.resource, t).backup_bytes > 0);

  fill(a, n, 13);  // new content: the next sleep refreshes the same host memory
  f.resource.sleep(only({t}));
  CHECK_EQ(f.resource.backup_view(a, n), first);
  CHECK(intact(first, n, 13));
  f.resource.wake({t});  // without retaining: the backup goes back to the pool
  CHECK(f.resource.backup_view(a, n) == nullptr);
  CHECK(!f.resource.read_backup(a, n, out.data()));
  CHECK(intact(a, n, 13));
  CHECK_EQ(state_of(f.resource, t).backup_bytes, 0u);

  // A retained backup whose blocks are all freed goes back to the pool.
  f.resource.sleep(only({t}));
  f.resource.wake({t}, true);
  f.resource.deallocate(c, 1000);
  CHECK(f.resource.backup_view(a, n) != nullptr);
  f.resource.deallocate(a, n);
  CHECK_EQ(state_of(f.resource, t).backup_bytes, 0u);
  CHECK_EQ(f.resource.stats().allocated_bytes, 0u);
}

TEST_CASE("sleep runs the writes queued on a host stream before it copies, as the device path waits for the device") {
  fixture f;
  const tag_id t = intern_tag("sleep-test-queued-write");
  int stream_key = 0;
  void* a = allocate_in(f.resource, t, 4096, &stream_key);
  fill(a, 4096, 3);
  // A write still queued on the host stream when sleep is called: a kernel still running.
  defer_host_work(&stream_key, [a] { fill(a, 4096, 4); });
  f.resource.sleep(only({t}));
  f.resource.wake({t});
  CHECK(intact(a, 4096, 4));
  f.resource.deallocate(a, 4096, &stream_key);
}

TEST_CASE("check_awake refuses memory of a sleeping tag with invalid_state, and passes it once awake") {
  fixture f;
  const tag_id t = intern_tag("sleep-test-check-awake");
  const tag_id other = intern_tag("sleep-test-check-awake-other");
  void* a = allocate_in(f.resource, t, 3 * granule);
  void* b = allocate_in(f.resource, other, 100);
  f.resource.check_awake(a, 3 * granule);
  f.resource.sleep(only({t}));
  CHECK_THROWS_WITH_AS(f.resource.check_awake(static_cast<char*>(a) + granule, 8),
                       doctest::Contains("'sleep-test-check-awake', which is asleep"), invalid_state);
  f.resource.check_awake(b, 100);  // another tag's memory stays usable
  f.resource.wake({t});
  f.resource.check_awake(a, 3 * granule);
  f.resource.deallocate(a, 3 * granule, nullptr);
  f.resource.deallocate(b, 100, nullptr);
}

TEST_CASE("GPUMEM_SLEEP_RESERVE's option pins the reservation when the resource is made") {
  expandable_options o = small_range();
  o.backup_reserve_bytes = 1;
  fixture f(make_host_vmm(granule), o);
  while (f.resource.backup_pool_bytes() == 0) std::this_thread::yield();  // a hang is the failure
  CHECK_EQ(f.resource.backup_pool_bytes(), detail::sleep_engine::pin_chunk_bytes);
  const tag_id t = intern_tag("sleep-test-reserved");
  void* a = allocate_in(f.resource, t, 5000);
  fill(a, 5000, 6);
  const sleep_report slept = f.resource.sleep(only({t}));
  CHECK_EQ(slept.timing.pooled_bytes, detail::sleep_engine::pin_chunk_bytes);
  CHECK_EQ(slept.timing.pinned_bytes, 0u);
  f.resource.wake({t});
  CHECK(intact(a, 5000, 6));
  f.resource.deallocate(a, 5000, nullptr);
}
