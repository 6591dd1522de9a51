// The sleeping strategies' shared parts (src/core/resources/sleep_engine.hpp) on host memory: tags,
// the tag book, and the engine's copies out and back, its host memory pool and its limit.
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "../src/core/resources/sleep_engine.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/sleep.hpp"
#include "gpumem/stream_ordering.hpp"

using namespace gpumem;
using detail::sleep_engine;
using detail::sleep_span;
using detail::sleep_unit;
using detail::tag_book;

namespace {

constexpr std::size_t page = 4096;

// A reserved range whose units are mapped (read/write) and released (dropped, then no access) as a
// physical mapping would be: content does not survive a release.
struct fake_range {
  std::size_t bytes;
  std::byte* base;
  std::vector<void*> mapped_log;
  std::vector<void*> released_log;
  explicit fake_range(std::size_t n) : bytes(n) {
    base = static_cast<std::byte*>(mmap(nullptr, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(base != MAP_FAILED);
  }
  ~fake_range() { munmap(base, bytes); }
  void map(const sleep_unit& u) {
    REQUIRE(mprotect(u.addr, u.bytes, PROT_READ | PROT_WRITE) == 0);
    mapped_log.push_back(u.addr);
  }
  void release(const sleep_unit& u) {
    REQUIRE(madvise(u.addr, u.bytes, MADV_DONTNEED) == 0);
    REQUIRE(mprotect(u.addr, u.bytes, PROT_NONE) == 0);
    released_log.push_back(u.addr);
  }
};

void fill(std::byte* p, std::size_t n, unsigned seed) {
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
}
bool holds(const std::byte* p, std::size_t n, unsigned seed) {
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] != static_cast<std::byte>((i * 131 + seed) & 0xff)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("tags are interned once, checked, and scoped per thread over the process tag") {
  const tag_id a = intern_tag("weights");
  CHECK(intern_tag("weights") == a);
  CHECK(a != default_tag);
  CHECK(tag_name(a) == "weights");
  CHECK(tag_name(default_tag) == "default");
  CHECK(intern_tag("default") == default_tag);
  CHECK_THROWS_AS(intern_tag(""), invalid_argument);
  CHECK_THROWS_AS(intern_tag(std::string(max_tag_length + 1, 'x')), invalid_argument);
  CHECK_THROWS_WITH_AS(intern_tag(std::string("kv\0junk", 7)), doctest::Contains("\\x00"), invalid_argument);
  CHECK_THROWS_AS(tag_name(1u << 30), invalid_argument);

  const tag_id kv = intern_tag("kv");
  CHECK(current_tag() == default_tag);
  const tag_id before = set_process_tag(kv);
  CHECK(before == default_tag);
  CHECK(current_tag() == kv);
  {
    tag_scope scope(a);
    CHECK(current_tag() == a);
    tag_id seen_elsewhere = 0;
    std::thread([&] { seen_elsewhere = current_tag(); }).join();
    CHECK(seen_elsewhere == kv);  // another thread sees the process tag, not this thread's scope
  }
  CHECK(current_tag() == kv);
  set_process_tag(default_tag);
  CHECK(current_tag() == default_tag);
}

TEST_CASE("the tag book refuses allocations in sleeping tags and unknown tags, listing the known ones") {
  tag_book book;
  const tag_id w = intern_tag("weights");
  const tag_id kv = intern_tag("kv");
  book.on_allocate(w);
  book.on_allocate(kv);
  book.on_allocate(w);
  REQUIRE(book.entries().size() == 2);

  sleep_report report;
  sleep_request request;
  request.keep_all = false;
  request.keep = {w};
  const auto plan = book.plan_sleep(request, report, "expandable");
  REQUIRE(plan.size() == 2);
  CHECK(plan[0] == std::make_pair(w, sleep_mode::keep));
  CHECK(plan[1] == std::make_pair(kv, sleep_mode::discard));

  book.find(kv)->asleep = true;
  CHECK_THROWS_WITH_AS(book.on_allocate(kv), doctest::Contains("'kv' is asleep"), invalid_state);
  sleep_report again;
  CHECK(book.plan_sleep(sleep_request{{kv}, true, {}}, again, "expandable").empty());
  CHECK(again.unchanged == std::vector<tag_id>{kv});

  sleep_report woken;
  CHECK(book.plan_wake({}, woken, "expandable") == std::vector<tag_id>{kv});
  sleep_report awake;
  CHECK(book.plan_wake({w}, awake, "expandable").empty());
  CHECK(awake.unchanged == std::vector<tag_id>{w});

  const tag_id other = intern_tag("never-used");
  CHECK_THROWS_WITH_AS(book.plan_sleep(sleep_request{{other}, true, {}}, report, "expandable"),
                       doctest::Contains("'weights', 'kv'"), invalid_argument);
  CHECK_THROWS_AS(book.plan_wake({other}, report, "expandable"), invalid_argument);
}

TEST_CASE("the engine keeps content across release and map, spans crossing units included") {
  fake_range r(16 * page);
  sleep_engine engine(memory_kind::host, -1);
  const std::vector<sleep_unit> units{{r.base, 4 * page}, {r.base + 4 * page, 8 * page}, {r.base + 12 * page, 4 * page}};
  for (const auto& u : units) r.map(u);
  // Two live blocks: one inside the first unit, one across the second and third.
  const std::vector<sleep_span> spans{{r.base + 100, 3 * page}, {r.base + 10 * page, 5 * page}};
  fill(static_cast<std::byte*>(spans[0].addr), spans[0].bytes, 1);
  fill(static_cast<std::byte*>(spans[1].addr), spans[1].bytes, 2);

  auto backup = engine.reserve(8 * page, resource_stats{});
  CHECK(backup.pending_bytes() >= 8 * page);
  engine.save_and_release(backup, spans, units, [&](const sleep_unit& u) { r.release(u); });
  CHECK(r.released_log.size() == 3);
  CHECK(backup.saved_bytes() == 8 * page);

  engine.map_and_restore(backup, units, [&](const sleep_unit& u) { r.map(u); }, [&](const sleep_unit& u) { r.release(u); });
  CHECK(holds(static_cast<std::byte*>(spans[0].addr), spans[0].bytes, 1));
  CHECK(holds(static_cast<std::byte*>(spans[1].addr), spans[1].bytes, 2));
  // The backup's memory went to the pool, and the next sleep of the same size takes it from there.
  CHECK(backup.empty());
  const auto pooled = engine.pool_bytes();
  CHECK(pooled >= 8 * page);
  auto again = engine.reserve(8 * page, resource_stats{});
  CHECK(engine.pool_bytes() == 0);
  engine.recycle(again);
  CHECK(engine.pool_bytes() == pooled);
  engine.trim();
  CHECK(engine.pool_bytes() == 0);
}

TEST_CASE("a block forgotten while asleep is not restored") {
  fake_range r(8 * page);
  sleep_engine engine(memory_kind::host, -1);
  const std::vector<sleep_unit> units{{r.base, 8 * page}};
  r.map(units[0]);
  const std::vector<sleep_span> spans{{r.base, 2 * page}, {r.base + 4 * page, 2 * page}};
  fill(r.base, 2 * page, 3);
  fill(r.base + 4 * page, 2 * page, 4);
  auto backup = engine.reserve(4 * page, resource_stats{});
  engine.save_and_release(backup, spans, units, [&](const sleep_unit& u) { r.release(u); });
  backup.forget(r.base + 4 * page, 2 * page);
  CHECK(backup.saved_bytes() == 2 * page);
  engine.map_and_restore(backup, units, [&](const sleep_unit& u) { r.map(u); }, [&](const sleep_unit& u) { r.release(u); });
  CHECK(holds(r.base, 2 * page, 3));
  CHECK(static_cast<int>(r.base[4 * page]) == 0);  // dropped: the fresh mapping's zeros
}

TEST_CASE("a map that fails releases what the wake mapped and keeps the backup whole") {
  fake_range r(8 * page);
  sleep_engine engine(memory_kind::host, -1);
  const std::vector<sleep_unit> units{{r.base, 4 * page}, {r.base + 4 * page, 4 * page}};
  for (const auto& u : units) r.map(u);
  const std::vector<sleep_span> spans{{r.base, 8 * page}};
  fill(r.base, 8 * page, 5);
  auto backup = engine.reserve(8 * page, resource_stats{});
  engine.save_and_release(backup, spans, units, [&](const sleep_unit& u) { r.release(u); });
  r.released_log.clear();
  int calls = 0;
  CHECK_THROWS_AS(engine.map_and_restore(
                      backup, units,
                      [&](const sleep_unit& u) {
                        if (++calls == 2) throw out_of_memory("no room", u.bytes, resource_stats{});
                        r.map(u);
                      },
                      [&](const sleep_unit& u) { r.release(u); }),
                  out_of_memory);
  CHECK(r.released_log == std::vector<void*>{r.base});
  CHECK(backup.saved_bytes() == 8 * page);
  engine.map_and_restore(backup, units, [&](const sleep_unit& u) { r.map(u); }, [&](const sleep_unit& u) { r.release(u); });
  CHECK(holds(r.base, 8 * page, 5));
}

TEST_CASE("the backup limit refuses before anything is taken, and counts what is held") {
  constexpr std::size_t chunk = sleep_engine::pin_chunk_bytes;
  sleep_engine engine(memory_kind::host, -1);
  engine.set_backup_limit(std::uint64_t{1});
  CHECK_THROWS_WITH_AS(engine.reserve(page, resource_stats{}), doctest::Contains("backupLimitBytes"), out_of_memory);
  CHECK(engine.pool_bytes() == 0);
  engine.set_backup_limit(chunk);
  auto first = engine.reserve(page, resource_stats{});
  // Granted a whole chunk: pinned on the engine's threads, taken as the copies need it (or pooled
  // already, where the chunk was done before the grant).
  CHECK(first.bytes() + first.pending_bytes() == chunk);
  // The first backup holds the whole limit: a second one is refused until the first is recycled.
  CHECK_THROWS_AS(engine.reserve(page, resource_stats{}), out_of_memory);
  engine.recycle(first);
  auto second = engine.reserve(page, resource_stats{});
  CHECK(second.bytes() + second.pending_bytes() == chunk);  // the same chunk, not a second one
  std::vector<std::byte> block(page);
  engine.save_and_release(second, {{block.data(), page}}, {}, [](const sleep_unit&) {});
  CHECK(second.bytes() == chunk);
  CHECK(second.pending_bytes() == 0);
  CHECK(second.saved_bytes() == page);
  engine.recycle(second);
  CHECK(engine.pool_bytes() == chunk);
  // Held in the pool, it counts against the limit until trimmed.
  CHECK_THROWS_AS(engine.reserve(chunk + page, resource_stats{}), out_of_memory);
  engine.trim();
  CHECK(engine.pool_bytes() == 0);
  CHECK(engine.reserve(0, resource_stats{}).empty());
}

namespace {

// Waits (without a time bound: a hang is the failure) until the engine's pinning threads are done.
void wait_pinned(const sleep_engine& engine) {
  while (engine.pinning_bytes() != 0) std::this_thread::yield();
}

}  // namespace

TEST_CASE("reserve_ahead pins whole chunks in the background and a sleep takes them from the pool") {
  constexpr std::size_t chunk = sleep_engine::pin_chunk_bytes;
  sleep_engine engine(memory_kind::host, -1);
  engine.reserve_ahead(2 * chunk + 1, resource_stats{});  // rounded up to whole chunks
  wait_pinned(engine);
  CHECK(engine.pool_bytes() == 3 * chunk);
  engine.reserve_ahead(3 * chunk, resource_stats{});  // held already: nothing more
  CHECK(engine.pinning_bytes() == 0);
  CHECK(engine.pool_bytes() == 3 * chunk);

  // A keep-sleep of 2.5 chunks of content, spans across chunk edges: copied from the pool alone.
  const std::size_t content = 2 * chunk + chunk / 2;
  std::vector<std::byte> device(content);
  fill(device.data(), content, 7);
  engine.begin_timing();
  auto backup = engine.reserve(content, resource_stats{});
  CHECK(backup.pending_bytes() == 0);
  engine.save_and_release(backup, {{device.data(), content}}, {}, [](const sleep_unit&) {});
  const sleep_timing t = engine.end_timing();
  CHECK(t.pooled_bytes == 3 * chunk);
  CHECK(t.pinned_bytes == 0);
  std::memset(device.data(), 0, content);
  engine.map_and_restore(backup, {}, [](const sleep_unit&) {}, [](const sleep_unit&) {});
  CHECK(holds(device.data(), content, 7));
  CHECK(engine.pool_bytes() == 3 * chunk);
}

TEST_CASE("a sleep that finds a reservation partly done takes it and adds only what it lacks") {
  constexpr std::size_t chunk = sleep_engine::pin_chunk_bytes;
  sleep_engine engine(memory_kind::host, -1);
  engine.set_backup_limit(4 * chunk);
  engine.reserve_ahead(2 * chunk, resource_stats{});
  // At once, whatever the threads have done: 4 chunks of content need 2 more chunks, not 4.
  const std::size_t content = 4 * chunk;
  std::vector<std::byte> device(content);
  fill(device.data(), content, 9);
  engine.begin_timing();
  auto backup = engine.reserve(content, resource_stats{});
  CHECK(backup.bytes() + backup.pending_bytes() == content);
  // The limit counts what is being pinned: no room for one more chunk.
  CHECK_THROWS_WITH_AS(engine.reserve_ahead(5 * chunk, resource_stats{}), doctest::Contains("being pinned"),
                       out_of_memory);
  engine.save_and_release(backup, {{device.data(), content}}, {}, [](const sleep_unit&) {});
  const sleep_timing t = engine.end_timing();
  CHECK(t.pooled_bytes + t.pinned_bytes >= content);  // each chunk came from the pool or was pinned meanwhile
  CHECK(backup.pending_bytes() == 0);
  CHECK(backup.saved_bytes() == content);
  std::memset(device.data(), 0, content);
  engine.map_and_restore(backup, {}, [](const sleep_unit&) {}, [](const sleep_unit&) {});
  CHECK(holds(device.data(), content, 9));
  wait_pinned(engine);
  CHECK(engine.pool_bytes() == content);  // the reservation was used, not pinned twice
}

TEST_CASE("a reservation the engine is destroyed under is freed, and trim frees what is ready") {
  constexpr std::size_t chunk = sleep_engine::pin_chunk_bytes;
  {
    sleep_engine engine(memory_kind::host, -1);
    engine.reserve_ahead(4 * chunk, resource_stats{});
  }  // joins the pinning threads and frees their chunks (the sanitized build checks for leaks)
  sleep_engine engine(memory_kind::host, -1);
  engine.reserve_ahead(chunk, resource_stats{});
  wait_pinned(engine);
  CHECK(engine.pool_bytes() == chunk);
  engine.trim();
  CHECK(engine.pool_bytes() == 0);
}

TEST_CASE("quiesce runs the work queued on host streams first, as the device's synchronise does") {
  sleep_engine engine(memory_kind::host, -1);
  int value = 0;
  int stream_key = 0;
  defer_host_work(&stream_key, [&value] { value = 42; });
  CHECK(value == 0);  // queued, not run
  engine.quiesce();
  CHECK(value == 42);
}
