// Sleep and wake by tag of tiered_resource on the host twin (memfd mappings): content and addresses
// kept across sleep and wake, discard, every tag asleep leaving the device tier holding nothing
// (cached blocks included), frees while asleep, allocations and prefetches in a sleeping tag, unknown
// tags, the no-op cases, wake when the device budget or the "driver" is short, sleep when host memory
// for the backups is short, host-tier blocks left in place, and the strategy's descriptor. Where a GPU
// is present (a CUDA build), one case runs the same round trip through CUDA VMM.
#include <algorithm>
#include <atomic>
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
#include "gpumem/device.hpp"
#include "gpumem/sleep.hpp"
#include "gpumem/strategy_registry.hpp"
#include "gpumem/vmm.hpp"
#include "gpumem/tiered_resource.hpp"
#include "pool_test_support.hpp"
#include "sleep_test_support.hpp"
#include "tiered_test_support.hpp"

using namespace gpumem;
using namespace gpumem::test;

namespace {

// A resource over the twin (64 KiB granules, 8 on the device, 8 on the host) with a fake ordering.
struct fixture : tiered_fixture {
  explicit fixture(tiered_options options = budgets(8 * granule, 8 * granule),
                   std::uint64_t device_capacity = UINT64_MAX)
      : tiered_fixture(options, device_capacity) {}

  // Allocates `bytes` in `tag`.
  void* allocate(tag_id tag, std::size_t bytes) { return allocate_in(resource, tag, bytes); }
  tag_state state(tag_id tag) const { return state_of(resource, tag); }
};

sleep_request keep(std::vector<tag_id> tags) {
  sleep_request r;
  r.tags = std::move(tags);
  return r;
}

sleep_request discard(std::vector<tag_id> tags) {
  sleep_request r;
  r.tags = std::move(tags);
  r.keep_all = false;
  return r;
}

bool has(const std::vector<tag_id>& tags, tag_id tag) { return std::find(tags.begin(), tags.end(), tag) != tags.end(); }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("keep: content and addresses survive sleep and wake") {
  fixture f;
  const tag_id kv = intern_tag("kv");
  const std::size_t na = 2 * granule + 5, nb = 1000;
  void* a = f.allocate(kv, na);
  void* b = f.allocate(kv, nb);
  fill(a, na, 1);
  fill(b, nb, 2);
  CHECK_EQ(f.memory->device_held, 4 * granule);

  const sleep_report slept = f.resource.sleep(keep({kv}));
  CHECK(slept.changed == std::vector<tag_id>{kv});
  CHECK(slept.unchanged.empty());
  CHECK_EQ(slept.device_bytes, 4 * granule);
  CHECK_EQ(slept.copied_bytes, na + nb);
  CHECK(slept.seconds >= 0);
  CHECK_EQ(f.memory->device_held, 0u);
  resource_stats s = f.resource.stats();
  CHECK_EQ(s.reserved_bytes, 0u);        // the device tier's bytes drop by the slept ones
  CHECK_EQ(s.allocated_bytes, na + nb);  // the blocks are still the caller's
  CHECK_EQ(f.resource.allocation_size(a), na);
  const tag_state asleep = f.state(kv);
  CHECK(asleep.asleep);
  CHECK(asleep.mode == sleep_mode::keep);
  CHECK_EQ(asleep.allocated_bytes, na + nb);
  CHECK_EQ(asleep.device_bytes, 0u);
  CHECK_EQ(asleep.slept_bytes, 4 * granule);
  CHECK(asleep.backup_bytes >= na + nb);

  const sleep_report woken = f.resource.wake({kv});
  CHECK(woken.changed == std::vector<tag_id>{kv});
  CHECK_EQ(woken.device_bytes, 4 * granule);
  CHECK_EQ(woken.copied_bytes, na + nb);
  CHECK(intact(a, na, 1));  // the same addresses, the same content
  CHECK(intact(b, nb, 2));
  CHECK(f.resource.tier_of(a) == placement::device);
  CHECK_EQ(f.memory->device_held, 4 * granule);
  CHECK_EQ(f.resource.stats().reserved_bytes, 4 * granule);
  const tag_state awake = f.state(kv);
  CHECK_FALSE(awake.asleep);
  CHECK_EQ(awake.device_bytes, 4 * granule);
  CHECK_EQ(awake.slept_bytes, 0u);
  CHECK_EQ(awake.backup_bytes, 0u);

  // The host memory stays for the next sleep until trim_backup.
  CHECK(f.resource.backup_pool_bytes() >= na + nb);
  f.resource.sleep(keep({kv}));
  f.resource.wake({kv});
  CHECK(intact(a, na, 1));
  f.resource.trim_backup();
  CHECK_EQ(f.resource.backup_pool_bytes(), 0u);

  // Awake again, the tag allocates, frees and writes as before.
  fill(a, na, 3);
  void* c = f.allocate(kv, 10);
  f.resource.deallocate(c, 10);
  f.resource.deallocate(b, nb);
  f.resource.deallocate(a, na);
  CHECK_EQ(f.resource.stats().allocated_bytes, 0u);
}

TEST_CASE("discard keeps the addresses and no content, keep lists pick the tags that keep") {
  fixture f;
  const tag_id weights = intern_tag("weights"), scratch = intern_tag("scratch");
  void* w = f.allocate(weights, granule);
  void* x = f.allocate(scratch, 3 * granule);
  fill(w, granule, 4);
  fill(x, 3 * granule, 5);
  sleep_request r;
  r.tags = {weights, scratch};
  r.keep_all = false;
  r.keep = {weights};
  const sleep_report slept = f.resource.sleep(r);
  CHECK(has(slept.changed, weights));
  CHECK(has(slept.changed, scratch));
  CHECK_EQ(slept.device_bytes, 4 * granule);
  CHECK_EQ(slept.copied_bytes, granule);  // weights only
  CHECK(f.state(weights).mode == sleep_mode::keep);
  CHECK(f.state(scratch).mode == sleep_mode::discard);
  CHECK_EQ(f.state(scratch).backup_bytes, 0u);
  CHECK_EQ(f.state(scratch).slept_bytes, 3 * granule);

  const sleep_report woken = f.resource.wake({});  // every sleeping tag
  CHECK_EQ(woken.changed.size(), 2u);
  CHECK_EQ(woken.copied_bytes, granule);
  CHECK_EQ(woken.device_bytes, 4 * granule);
  CHECK(intact(w, granule, 4));
  fill(x, 3 * granule, 6);  // mapped again at its address: writable, its old content gone
  CHECK(intact(x, 3 * granule, 6));
  f.resource.deallocate(x, 3 * granule);
  f.resource.deallocate(w, granule);

  // A discard sleep of every tag.
  void* y = f.allocate(scratch, 100);
  CHECK_EQ(f.resource.sleep(discard({})).copied_bytes, 0u);
  f.resource.deallocate(y, 100);
}

TEST_CASE("sleeping every tag leaves the device tier holding nothing, cached blocks included") {
  fixture f;
  const tag_id kv = intern_tag("kv"), act = intern_tag("activations");
  void* a = f.allocate(kv, granule);
  void* b = f.allocate(act, 2 * granule);
  void* c = f.allocate(act, granule);
  void* d = f.resource.allocate(granule);  // the default tag
  fill(a, granule, 7);
  fill(d, granule, 8);
  f.resource.deallocate(c, granule);  // cached, its tag 'activations'
  CHECK_EQ(f.resource.cached_blocks(), 1u);
  CHECK_EQ(f.memory->device_held, 5 * granule);
  CHECK_EQ(f.state(act).device_bytes, 3 * granule);  // live and cached

  const sleep_report r = f.resource.sleep(sleep_request{});
  CHECK_EQ(r.changed.size(), 3u);
  CHECK(has(r.changed, default_tag));
  CHECK_EQ(r.device_bytes, 5 * granule);  // the cached block's too
  CHECK_EQ(f.memory->device_held, 0u);
  CHECK_EQ(f.resource.cached_blocks(), 0u);
  CHECK_EQ(f.resource.stats().reserved_bytes, 0u);
  for (const tag_state& s : f.resource.tag_states()) {
    CHECK(s.asleep);
    CHECK_EQ(s.device_bytes, 0u);
  }
  CHECK_EQ(f.state(act).slept_bytes, 3 * granule);  // what its sleep released: the live block and the cached one

  f.resource.wake({});
  CHECK_EQ(f.memory->device_held, 4 * granule);
  CHECK(intact(a, granule, 7));
  CHECK(intact(d, granule, 8));
  f.resource.deallocate(a, granule);
  f.resource.deallocate(b, 2 * granule);
  f.resource.deallocate(d, granule);
}

TEST_CASE("a block freed while its tag sleeps is dropped, the rest wakes") {
  fixture f;
  const tag_id kv = intern_tag("kv");
  void* a = f.allocate(kv, 2 * granule);
  void* b = f.allocate(kv, 500);
  fill(a, 2 * granule, 9);
  fill(b, 500, 10);
  f.resource.sleep(keep({kv}));
  const std::uint64_t backup = f.state(kv).backup_bytes;
  f.resource.deallocate(a, 2 * granule);
  CHECK_EQ(f.resource.allocation_size(a), 0u);
  const tag_state s = f.state(kv);
  CHECK_EQ(s.allocated_bytes, 500u);
  CHECK_EQ(s.slept_bytes, granule);
  CHECK_EQ(s.backup_bytes, backup);  // the host memory is held until wake
  CHECK_EQ(f.resource.stats().allocated_bytes, 500u);
  CHECK_EQ(f.resource.cached_blocks(), 0u);  // nothing to cache: nothing was mapped
  f.resource.trim();                         // leaves the sleeping block alone
  CHECK_EQ(f.resource.allocation_size(b), 500u);
  CHECK_THROWS_AS(f.resource.deallocate(b, 499), invalid_argument);  // still checked

  const sleep_report r = f.resource.wake({kv});
  CHECK_EQ(r.device_bytes, granule);
  CHECK_EQ(r.copied_bytes, 500u);
  CHECK(intact(b, 500, 10));
  CHECK_EQ(f.memory->device_held, granule);
  f.resource.deallocate(b, 500);

  // Every block freed while asleep: wake maps nothing and the tag is awake.
  void* c = f.allocate(kv, 100);
  f.resource.sleep(keep({kv}));
  f.resource.deallocate(c, 100);
  const sleep_report empty = f.resource.wake({kv});
  CHECK(empty.changed == std::vector<tag_id>{kv});
  CHECK_EQ(empty.device_bytes, 0u);
  CHECK_FALSE(f.state(kv).asleep);
  CHECK_EQ(f.state(kv).backup_bytes, 0u);
  CHECK_EQ(f.resource.stats().allocated_bytes, 0u);
}

TEST_CASE("an allocation or a prefetch in a sleeping tag throws invalid_state and changes nothing") {
  fixture f;
  const tag_id kv = intern_tag("kv"), other = intern_tag("other");
  void* a = f.allocate(kv, granule);
  void* o = f.allocate(other, granule);
  f.resource.sleep(keep({kv}));
  const resource_stats before = f.resource.stats();
  try {
    f.allocate(kv, 100);
    CHECK(false);
  } catch (const invalid_state& e) {
    CHECK(contains(e.what(), "tag 'kv' is asleep"));
  }
  {
    tag_scope scope(kv);
    CHECK_THROWS_AS(f.resource.allocate(100), invalid_state);
  }
  const tag_id previous = set_process_tag(kv);  // the process tag counts as well
  CHECK_THROWS_AS(f.resource.allocate(100), invalid_state);
  set_process_tag(previous);
  try {
    f.resource.prefetch(a, granule, placement::host);
    CHECK(false);
  } catch (const invalid_state& e) {
    CHECK(contains(e.what(), "tag 'kv' is asleep"));
  }
  const resource_stats after = f.resource.stats();
  CHECK_EQ(after.allocated_bytes, before.allocated_bytes);
  CHECK_EQ(after.reserved_bytes, before.reserved_bytes);
  CHECK_EQ(after.oom_count, before.oom_count);
  CHECK_EQ(f.resource.tag_states().size(), 2u);
  CHECK(f.state(kv).asleep);
  // Other tags go on.
  void* p = f.allocate(other, granule);
  CHECK(f.resource.prefetch(o, granule, placement::host));
  f.resource.deallocate(p, granule);
  f.resource.deallocate(o, granule);
  f.resource.wake({kv});
  f.resource.deallocate(a, granule);
}

TEST_CASE("unknown tags get invalid_argument listing the known ones") {
  fixture f;
  const tag_id kv = intern_tag("kv");
  const tag_id never = intern_tag("never-allocated-in");
  void* a = f.allocate(kv, 100);
  for (int call = 0; call < 2; ++call) {
    try {
      if (call == 0) f.resource.sleep(keep({kv, never}));
      if (call == 1) f.resource.wake({never});
      CHECK(false);
    } catch (const invalid_argument& e) {
      CHECK(e.error_kind() == invalid_argument::kind::range);
      CHECK_EQ(e.argument(), std::string("tags"));
      CHECK(contains(e.what(), "never-allocated-in"));
      CHECK(contains(e.what(), "kv"));
    }
  }
  CHECK_FALSE(f.state(kv).asleep);  // nothing changed, kv included
  CHECK_EQ(f.memory->device_held, granule);
  f.resource.deallocate(a, 100);
}

TEST_CASE("sleep of a sleeping tag and wake of an awake tag change nothing") {
  fixture f;
  const tag_id kv = intern_tag("kv"), other = intern_tag("other");
  void* a = f.allocate(kv, granule);
  void* o = f.allocate(other, granule);
  fill(a, granule, 11);
  const sleep_report awake = f.resource.wake({kv});
  CHECK(awake.changed.empty());
  CHECK(awake.unchanged == std::vector<tag_id>{kv});
  CHECK_EQ(awake.device_bytes, 0u);
  f.resource.sleep(keep({kv}));
  const std::uint64_t backup = f.state(kv).backup_bytes;
  const sleep_report again = f.resource.sleep(discard({kv, other}));
  CHECK(again.unchanged == std::vector<tag_id>{kv});
  CHECK(again.changed == std::vector<tag_id>{other});
  CHECK(f.state(kv).mode == sleep_mode::keep);  // as it fell asleep
  CHECK_EQ(f.state(kv).backup_bytes, backup);
  CHECK(f.resource.wake({}).changed.size() == 2u);
  CHECK(intact(a, granule, 11));
  f.resource.deallocate(o, granule);
  f.resource.deallocate(a, granule);
}

TEST_CASE("wake without room on the device throws out_of_memory and the tag stays asleep") {
  fixture f(budgets(4 * granule, 8 * granule));
  const tag_id kv = intern_tag("kv"), other = intern_tag("other");
  void* a = f.allocate(kv, 2 * granule);
  void* b = f.allocate(kv, granule);
  fill(a, 2 * granule, 12);
  fill(b, granule, 13);
  f.resource.sleep(keep({kv}));
  f.resource.set_placement(placement_choice::device);
  void* o = f.allocate(other, 2 * granule);  // the room the sleep gave back
  f.resource.set_placement(placement_choice::automatic);
  const std::uint64_t held = f.memory->device_held;
  try {
    f.resource.wake({kv});
    CHECK(false);
  } catch (const out_of_memory& e) {
    CHECK(contains(e.what(), "'kv'"));
    CHECK(contains(e.what(), "device budget"));
    CHECK_EQ(e.requested_bytes(), 3 * granule);
  }
  CHECK(f.state(kv).asleep);
  CHECK_EQ(f.state(kv).slept_bytes, 3 * granule);
  CHECK_EQ(f.memory->device_held, held);  // nothing mapped
  CHECK_THROWS_AS(f.allocate(kv, 10), invalid_state);
  f.resource.deallocate(o, 2 * granule);  // cached: wake releases it to make room
  const sleep_report r = f.resource.wake({kv});
  CHECK_EQ(r.device_bytes, 3 * granule);
  CHECK(intact(a, 2 * granule, 12));
  CHECK(intact(b, granule, 13));
  CHECK_EQ(f.resource.stats().reserved_bytes, 3 * granule);
  f.resource.deallocate(a, 2 * granule);
  f.resource.deallocate(b, granule);
}

TEST_CASE("a wake the driver refuses half way releases what it mapped and the tag stays asleep") {
  fixture f(budgets(16 * granule, 8 * granule), 4 * granule);
  const tag_id kv = intern_tag("kv"), other = intern_tag("other");
  void* a = f.allocate(kv, granule);
  void* b = f.allocate(kv, 2 * granule);
  fill(a, granule, 14);
  fill(b, 2 * granule, 15);
  f.resource.sleep(keep({kv}));
  void* o = f.allocate(other, 2 * granule);  // 2 of the 4 the "driver" has: a maps, b does not
  CHECK(f.resource.tier_of(o) == placement::device);
  CHECK_THROWS_AS(f.resource.wake({kv}), out_of_memory);
  CHECK(f.memory->refused > 0);
  CHECK(f.state(kv).asleep);
  CHECK_EQ(f.state(kv).device_bytes, 0u);
  CHECK_EQ(f.memory->device_held, 2 * granule);  // a's memory went back
  CHECK_EQ(f.resource.stats().reserved_bytes, 2 * granule);
  f.resource.deallocate(o, 2 * granule);
  f.resource.wake({kv});
  CHECK(intact(a, granule, 14));
  CHECK(intact(b, 2 * granule, 15));
  f.resource.deallocate(a, granule);
  f.resource.deallocate(b, 2 * granule);
}

TEST_CASE("sleep without host memory for the backups throws out_of_memory before releasing anything") {
  tiered_options o = budgets(8 * granule, 8 * granule);
  o.backup_limit_bytes = 1 * KiB;
  fixture f(o);
  const tag_id kv = intern_tag("kv"), scratch = intern_tag("scratch");
  void* a = f.allocate(kv, granule);
  void* c = f.allocate(kv, granule);
  void* s = f.allocate(scratch, granule);
  fill(a, granule, 16);
  f.resource.deallocate(c, granule);  // cached
  const resource_stats before = f.resource.stats();
  sleep_request r;
  r.tags = {scratch, kv};
  r.keep_all = false;
  r.keep = {kv};
  try {
    f.resource.sleep(r);
    CHECK(false);
  } catch (const out_of_memory& e) {
    CHECK(contains(e.what(), "host"));
  }
  CHECK_FALSE(f.state(kv).asleep);
  CHECK_FALSE(f.state(scratch).asleep);  // the discarding tag too
  CHECK_EQ(f.memory->device_held, 3 * granule);
  CHECK_EQ(f.resource.cached_blocks(), 1u);
  CHECK_EQ(f.resource.stats().reserved_bytes, before.reserved_bytes);
  CHECK(intact(a, granule, 16));
  // Discarding needs no host memory.
  CHECK(f.resource.sleep(discard({kv})).changed == std::vector<tag_id>{kv});
  CHECK_EQ(f.memory->device_held, granule);
  f.resource.wake({kv});
  f.resource.deallocate(a, granule);
  f.resource.deallocate(s, granule);
}

TEST_CASE("host-tier blocks stay mapped and in place while their tag sleeps") {
  fixture f;
  const tag_id kv = intern_tag("kv");
  void* d = f.allocate(kv, granule);
  f.resource.set_placement(placement_choice::host);
  void* h = f.allocate(kv, granule + 7);
  f.resource.set_placement(placement_choice::automatic);
  fill(d, granule, 17);
  fill(h, granule + 7, 18);
  const resource_stats before = f.resource.stats();
  const sleep_report r = f.resource.sleep(keep({kv}));
  CHECK_EQ(r.device_bytes, granule);
  CHECK_EQ(r.copied_bytes, granule);  // the device block's bytes only
  CHECK(f.resource.tier_of(h) == placement::host);
  CHECK(intact(h, granule + 7, 18));  // readable while the tag sleeps
  const resource_stats during = f.resource.stats();
  CHECK_EQ(during.host_reserved_bytes, before.host_reserved_bytes);
  CHECK_EQ(during.host_allocated_bytes, before.host_allocated_bytes);
  const tag_state s = f.state(kv);
  CHECK_EQ(s.allocated_bytes, 2 * granule + 7);
  CHECK_EQ(s.device_bytes, 0u);
  CHECK_EQ(s.slept_bytes, granule);
  CHECK_THROWS_AS(f.resource.prefetch(h, granule, placement::device), invalid_state);
  f.resource.deallocate(h, granule + 7);  // an ordinary free: cached on the host tier
  CHECK_EQ(f.resource.cached_blocks(), 1u);
  f.resource.wake({kv});
  CHECK(intact(d, granule, 17));
  f.resource.deallocate(d, granule);
}

TEST_CASE("a resource destroyed while tags sleep gives everything back") {
  auto f = std::make_unique<fixture>();
  const tag_id kv = intern_tag("kv");
  void* a = f->allocate(kv, 3 * granule);
  fill(a, 3 * granule, 19);
  f->resource.sleep(keep({kv}));
  CHECK(f->state(kv).backup_bytes > 0);
  f.reset();  // the sanitized build reports a leak of the backup or a mapping
}

TEST_CASE("tags come from the thread scope, else the process tag, else default") {
  fixture f;
  const tag_id proc = intern_tag("process-tag"), thread = intern_tag("thread-tag");
  const tag_id previous = set_process_tag(proc);
  void* p = f.resource.allocate(100);
  void* t = nullptr;
  {
    tag_scope scope(thread);
    t = f.resource.allocate(200);
  }
  set_process_tag(previous);
  void* d = f.resource.allocate(300);
  const std::vector<tag_state> states = f.resource.tag_states();
  REQUIRE_EQ(states.size(), 3u);  // in the order first allocated in
  CHECK_EQ(states[0].tag, proc);
  CHECK_EQ(states[0].allocated_bytes, 100u);
  CHECK_EQ(states[1].tag, thread);
  CHECK_EQ(states[1].allocated_bytes, 200u);
  CHECK_EQ(states[2].tag, default_tag);
  CHECK_EQ(states[2].allocated_bytes, 300u);
  f.resource.deallocate(p, 100);
  f.resource.deallocate(t, 200);
  f.resource.deallocate(d, 300);
}

TEST_CASE("the tiered descriptor has the sleep flag, backupLimitBytes and sets the chain's sleeper") {
  const strategy_descriptor* d = find_strategy("tiered");
  REQUIRE(d != nullptr);
  CHECK(d->flags.sleep);
  const option_descriptor* limit = nullptr;
  for (const option_descriptor& o : d->options) {
    if (o.key == "backupLimitBytes") limit = &o;
  }
  REQUIRE(limit != nullptr);
  CHECK(limit->kind == option_kind::bytes);
  CHECK_EQ(limit->default_text, std::string(""));
  CHECK(contains(strategies_json(), "\"sleep\":true"));

  chain_spec spec;
  spec.strategy = "tiered";
  spec.options<tiered_spec>().backing = placement_choice::host;
  spec.options<tiered_spec>().options = budgets(4 * MiB, 64 * MiB);
  limit->apply(spec, option_value{std::uint64_t{KiB}});
  CHECK_EQ(spec.options<tiered_spec>().options.backup_limit_bytes.value_or(0), 1 * KiB);
  spec.limit_bytes = 32 * MiB;
  resource_chain chain = build_chain(spec);
  REQUIRE(chain.sleeper != nullptr);
  CHECK(chain.sleeper == dynamic_cast<sleepable*>(chain.placer));
  const tag_id kv = intern_tag("kv");
  void* a = nullptr;
  {
    tag_scope scope(kv);
    a = chain.top().allocate(MiB);
  }
  CHECK_THROWS_AS(chain.sleeper->sleep(keep({kv})), out_of_memory);  // 1 KiB of backups
  CHECK(chain.sleeper->sleep(discard({kv})).changed == std::vector<tag_id>{kv});
  CHECK(chain.sleeper->wake({kv}).changed == std::vector<tag_id>{kv});
  chain.top().deallocate(a, MiB);

  chain_spec plain;
  plain.strategy = "host";
  CHECK(build_chain(plain).sleeper == nullptr);
}

TEST_CASE("threads allocate in their tags while another tag sleeps and wakes") {
  fixture f(budgets(32 * granule, 64 * granule));
  const tag_id kv = intern_tag("kv");
  void* a = f.allocate(kv, 3 * granule);
  fill(a, 3 * granule, 20);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&f, &stop, t] {
      tag_scope scope(intern_tag("worker-" + std::to_string(t)));
      const stream_handle s = stream_key(0x1000 + t);
      for (int i = 0; i < 300 || !stop.load(); ++i) {
        const std::size_t n = (static_cast<std::size_t>(i % 3) + 1) * granule / 2;
        void* p = f.resource.allocate(n, s);
        fill(p, n, static_cast<std::uint8_t>(t));
        CHECK_MESSAGE(intact(p, n, static_cast<std::uint8_t>(t)), "contents changed");
        f.resource.deallocate(p, n, s);
        if (i > 100000) break;
      }
    });
  }
  for (int round = 0; round < 50; ++round) {
    f.resource.sleep(keep({kv}));
    f.resource.wake({kv});
    CHECK(intact(a, 3 * granule, 20));
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  f.resource.deallocate(a, 3 * granule);
  CHECK_EQ(f.resource.stats().allocated_bytes, 0u);
}

TEST_CASE("on a GPU, content survives sleep and wake through CUDA VMM") {
  if (device_count() == 0) return;  // a host-only build, or no GPU: the twin's cases above cover the logic
  tiered_options o;
  o.device_budget_bytes = 256 * MiB;
  o.host_budget_bytes = 256 * MiB;
  tiered_resource r(make_device_vmm(0, {"tiered", "upstream 'host'", 0, {}, true}), o);
  const tag_id kv = intern_tag("gpu-kv"), scratch = intern_tag("gpu-scratch");
  const std::size_t n = 70 * MiB + 123;  // more than one copy piece (64 MiB)
  // Written on the host tier (host-readable), then moved to the device for the sleep.
  r.set_placement(placement_choice::host);
  void* p = nullptr;
  {
    tag_scope scope(kv);
    p = r.allocate(n);
  }
  r.set_placement(placement_choice::automatic);
  fill(p, n, 21);
  REQUIRE(r.prefetch(p, n, placement::device));
  void* s = nullptr;
  {
    tag_scope scope(scratch);
    s = r.allocate(3 * MiB);
  }
  REQUIRE(r.tier_of(p) == placement::device);
  REQUIRE(r.tier_of(s) == placement::device);
  const std::uint64_t reserved = r.stats().reserved_bytes;

  sleep_request req;
  req.keep_all = false;
  req.keep = {kv};  // every tag; scratch discards
  const sleep_report slept = r.sleep(req);
  CHECK_EQ(slept.changed.size(), 2u);
  CHECK_EQ(slept.copied_bytes, n);
  CHECK_EQ(slept.device_bytes, reserved);
  CHECK_EQ(r.stats().reserved_bytes, 0u);
  CHECK(r.backup_pool_bytes() == 0u);

  const sleep_report woken = r.wake({});
  CHECK_EQ(woken.device_bytes, reserved);
  CHECK_EQ(woken.copied_bytes, n);
  REQUIRE(r.prefetch(p, n, placement::host));
  CHECK(intact(p, n, 21));
  CHECK(r.backup_pool_bytes() >= n);
  r.trim_backup();
  CHECK_EQ(r.backup_pool_bytes(), 0u);
  r.deallocate(s, 3 * MiB);
  r.deallocate(p, n);
}

TEST_CASE("read_backup copies a sleeping kept block's content") {
  fixture f;
  const tag_id kv = intern_tag("read-backup");
  const std::size_t n = 2 * granule + 5;
  void* a = f.allocate(kv, n);
  fill(a, n, 3);
  std::vector<std::byte> out(n);
  CHECK(!f.resource.read_backup(a, n, out.data()));
  f.resource.sleep(keep({kv}));
  CHECK(f.resource.read_backup(a, n, out.data()));
  CHECK(intact(out.data(), n, 3));
  f.resource.wake({kv});
  CHECK(!f.resource.read_backup(a, n, out.data()));
  f.resource.deallocate(a, n);
}

TEST_CASE("keep_cache and retain_backup are refused by name, nothing changed") {
  fixture f;
  const tag_id kv = intern_tag("tiered-sleep-test-refused");
  void* p = f.allocate(kv, granule);
  sleep_request request = keep({kv});
  request.keep_cache = true;
  try {
    f.resource.sleep(request);
    FAIL("keep_cache was accepted");
  } catch (const invalid_argument& e) {
    CHECK_EQ(e.argument(), "keep_cache");
    CHECK(contains(e.what(), "'expandable' offers it"));
  }
  CHECK(!f.state(kv).asleep);
  f.resource.sleep(keep({kv}));
  CHECK_THROWS_AS(f.resource.wake({kv}, true), invalid_argument);
  CHECK(f.state(kv).asleep);  // still asleep, its backup whole
  f.resource.wake({kv});
  f.resource.deallocate(p, granule);
}
