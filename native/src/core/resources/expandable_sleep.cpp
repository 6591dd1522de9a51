// expandable_resource: sleep and wake by tag (gpumem/sleep.hpp): the runs of a sleeping tag unmapped,
// their kept content saved by the sleep engine, and mapped and restored at wake. See expandable_impl.hpp.
#include "expandable_impl.hpp"
#include "expandable_hot_path.hpp"

#include <sys/resource.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace gpumem {

// A sleeping range keeps its run records (so that its blocks' granule counts stay right and wake
// knows what to map), but nothing is mapped there: every run is unmapped, counted out of reserved
// bytes and out of idle_granules, and none is idle (a run a free leaves idle is forgotten at once,
// as its memory holds nothing to keep). No release policy looks at a sleeping range.

// A freed block's saved content (its tag asleep, or awake with a retained backup) is not restored;
// a retained backup left with nothing goes back to the pool.
GPUMEM_POOL_COLD void expandable_resource::impl::forget_saved(tag_id tag, const block* b) noexcept {
  detail::tag_book::entry* e = book.find(tag);
  if (e == nullptr || e->backup.empty()) return;
  e->backup.forget(reinterpret_cast<void*>(b->addr), b->size);
  if (!e->asleep && e->backup.saved_bytes() == 0) {
    engine.recycle(e->backup);
    --retained_backups;
  }
}

// The backup a tag kept from its last wake (retain_backup), taken for its sleep now: its chunks hold
// `bytes` (the same blocks are then laid out at the same host addresses), else back to the pool.
detail::sleep_backup expandable_resource::impl::take_retained(tag_id tag, std::uint64_t bytes) noexcept {
  detail::tag_book::entry* e = book.find(tag);
  detail::sleep_backup kept;
  if (e == nullptr || e->backup.empty()) return kept;
  --retained_backups;
  if (bytes != 0 && e->backup.bytes() >= bytes) {
    kept = std::move(e->backup);
    e->backup = detail::sleep_backup{};
  } else {
    engine.recycle(e->backup);
  }
  return kept;
}

GPUMEM_POOL_COLD void expandable_resource::impl::forget_asleep_idle_runs(stream_range* r) noexcept {
  const auto& by_first = r->runs.by_first();
  for (auto it = by_first.begin(); it != by_first.end() && r->idle_runs != 0;) {
    const std::uint32_t s = it->second;
    ++it;  // forget_asleep_run erases the run's entry
    if (r->runs.slot(s).busy == 0) forget_asleep_run(r, s);
  }
  update_mapped_top(r);
}

// The runs of `r` as units (the physical mappings sleep releases and wake makes again).
void expandable_resource::impl::add_units(const stream_range* r, std::vector<detail::sleep_unit>& units) const {
  for (const auto& [first, s] : r->runs.by_first()) {
    units.push_back({granule_addr(r, first), r->runs.slot(s).length * granule});
  }
}

// Marks the ranges of `tag` asleep (their runs just unmapped) or awake (just mapped again): their
// runs' idle granules leave or join idle_granules.
void expandable_resource::impl::set_asleep(tag_id tag, bool asleep) noexcept {
  for_each_range_of(tag, [&](stream_range* r) {
    std::size_t idle = 0;
    for (const auto& [first, s] : r->runs.by_first()) idle += r->runs.slot(s).length - r->runs.slot(s).busy;
    if (asleep) {
      idle_granules -= idle;
    } else {
      idle_granules += idle;
    }
    r->asleep = asleep;
    if (!asleep) r->cache_sleeps = false;
  });
  largest_dirty = true;
}

sleep_report expandable_resource::impl::sleep(const sleep_request& request) {
  const auto start = std::chrono::steady_clock::now();
  sleep_report report;
  const auto plan = book.plan_sleep(request, report, "expandable");
  engine.begin_timing();
  if (!plan.empty()) sleep_tags(plan, request.keep_cache, report);
  report.timing = engine.end_timing();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

void expandable_resource::impl::sleep_tags(const std::vector<std::pair<tag_id, sleep_mode>>& plan, bool keep_cache, sleep_report& report) {
  engine.quiesce();  // every copy and release comes after the work queued on the memory
  merge_unmerged();
  process_pending();  // parked blocks whose events are done (all of them, after the device sync)

  struct work {
    tag_id tag;
    sleep_mode mode;
    std::vector<detail::sleep_span> spans;  // the live blocks' requested bytes, by address
    std::uint64_t bytes = 0;
    detail::sleep_backup backup;
  };
  std::vector<work> works;
  works.reserve(plan.size());
  for (const auto& [tag, mode] : plan) {
    work w{tag, mode, {}, 0, {}};
    if (mode == sleep_mode::keep) {
      for_each_range_of(tag, [&](stream_range* r) {
        for (const block* b = r->first; b != nullptr; b = b->next_in_segment) {
          if (b->state != block_state::live || b->requested == 0) continue;
          w.spans.push_back({reinterpret_cast<void*>(b->addr), b->requested});
          w.bytes += b->requested;
        }
      });
      std::sort(w.spans.begin(), w.spans.end(), [](const auto& a, const auto& b) { return a.addr < b.addr; });
    }
    works.push_back(std::move(w));
  }
  // The host memory of every backup before anything is released: a host too short changes nothing.
  auto recycle_from = [&](std::size_t i) noexcept {
    for (; i < works.size(); ++i) engine.recycle(works[i].backup);
  };
  try {
    for (work& w : works) {
      w.backup = take_retained(w.tag, w.bytes);
      if (w.bytes != 0 && w.backup.empty()) w.backup = engine.reserve(w.bytes, snapshot());
    }
  } catch (...) {
    recycle_from(0);
    throw;
  }

  for (std::size_t i = 0; i < works.size(); ++i) {
    work& w = works[i];
    std::uint64_t released = 0;
    std::vector<detail::sleep_unit> units;
    try {
      // Idle runs hold nothing: unmapped for good, as a release would (with keep_cache, units as
      // the others, mapped again at wake).
      for_each_range_of(w.tag, [&](stream_range* r) {
        r->cache_sleeps = keep_cache;
        const auto& by_first = r->runs.by_first();
        for (auto it = by_first.begin(); it != by_first.end() && r->idle_runs != 0 && !keep_cache;) {
          const std::uint32_t s = it->second;
          ++it;  // unmap_run erases the run's entry
          if (r->runs.slot(s).busy != 0) continue;
          released += r->runs.slot(s).length * granule;
          unmap_run(r, s);
        }
        update_mapped_top(r);
        add_units(r, units);
      });
      sort_by_address(units);
    } catch (...) {
      recycle_from(i);
      throw;
    }
    // The runs in use: unmapped once their content is copied, their records kept for wake.
    std::size_t unmapped = 0;
    const auto release = [&](const detail::sleep_unit& u) {
      memory->unmap_run(u.addr, u.bytes);
      counter.on_release(u.bytes);
      released += u.bytes;
      ++unmapped;
    };
    try {
      engine.save_and_release(w.backup, w.spans, units, release, snapshot());
    } catch (...) {
      // Nothing was released (the host refused the backup's memory, or a copy could not be
      // queued), or everything was (a copy failed while running).
      if (unmapped != 0) put_to_sleep(w.tag, w.mode, released, std::move(w.backup), report);
      recycle_from(i);
      throw;
    }
    report.copied_bytes += w.bytes;
    put_to_sleep(w.tag, w.mode, released, std::move(w.backup), report);
  }
}

void expandable_resource::impl::put_to_sleep(tag_id tag, sleep_mode mode, std::uint64_t released, detail::sleep_backup&& backup,
                  sleep_report& report) noexcept {
  set_asleep(tag, true);
  detail::tag_book::entry* e = book.find(tag);
  e->asleep = true;
  e->mode = mode;
  e->slept_bytes = released;
  e->backup = std::move(backup);
  report.changed.push_back(tag);
  report.device_bytes += released;
}

sleep_report expandable_resource::impl::wake(const wake_request& request) {
  const auto start = std::chrono::steady_clock::now();
  sleep_report report;
  for (const tag_id tag : book.plan_wake(request.tags, report, "expandable")) wake_tag(tag, request.retain_backup, report);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

void expandable_resource::impl::wake_tag(tag_id tag, bool retain, sleep_report& report) {
  detail::tag_book::entry* e = book.find(tag);
  std::vector<detail::sleep_unit> units;
  std::uint64_t needed = 0;
  for_each_range_of(tag, [&](stream_range* r) { add_units(r, units); });
  sort_by_address(units);
  for (const auto& u : units) needed += u.bytes;
  const std::uint64_t copied = e->backup.saved_bytes();
  std::uint64_t mapped = 0;
  const auto map = [&](const detail::sleep_unit& u) {
    memory->map_run(u.addr, u.bytes);
    counter.on_reserve(u.bytes);
    mapped += u.bytes;
  };
  const auto release = [&](const detail::sleep_unit& u) {
    memory->unmap_run(u.addr, u.bytes);
    counter.on_release(u.bytes);
    mapped -= u.bytes;
  };
  try {
    engine.map_and_restore(e->backup, units, map, release, retain);
  } catch (const out_of_memory& first) {
    // As an allocation would: the idle runs of the tags awake go, and the maps are tried once more.
    std::string failure = first.reason();
    synchronize_pending();
    bool woke = false;
    if (release_idle({0, 0}) > 0) {
      try {
        engine.map_and_restore(e->backup, units, map, release, retain);
        woke = true;
      } catch (const out_of_memory& again) {
        failure = again.reason();
      }
    }
    if (!woke) {
      counter.on_oom();
      throw out_of_memory("expandable_resource: out of memory waking tag '" + tag_name(tag) + "' (mapping " +
                              format_bytes(needed) + " failed after releasing every idle run: " + failure +
                              "); it stays asleep",
                          needed, snapshot());
    }
  }
  set_asleep(tag, false);
  e->asleep = false;
  e->slept_bytes = 0;
  if (retain && !e->backup.empty()) ++retained_backups;
  report.changed.push_back(tag);
  report.device_bytes += mapped;
  report.copied_bytes += copied;
}

// Throws invalid_state when [ptr, ptr + bytes) overlaps a range whose tag sleeps.
void expandable_resource::impl::check_awake(const void* ptr, std::size_t bytes) const {
  const auto& tags = book.entries();
  if (std::none_of(tags.begin(), tags.end(), [](const auto& e) { return e.asleep; })) return;  // the usual case
  const std::uintptr_t lo = reinterpret_cast<std::uintptr_t>(ptr);
  const std::uintptr_t hi = lo + std::max<std::size_t>(bytes, 1);
  for (const auto& owned : ranges) {
    const stream_range* r = owned.get();
    if (!r->asleep || hi <= r->base || lo >= r->base + r->size) continue;
    throw invalid_state("expandable: the memory at " + format_pointer(ptr) + " belongs to tag '" + tag_name(r->tag) +
                        "', which is asleep: wake it before reading or writing it");
  }
}

std::vector<tag_state> expandable_resource::impl::tag_states() {
  std::vector<tag_state> states;
  states.reserve(book.entries().size());
  for (const detail::tag_book::entry& e : book.entries()) {
    tag_state t;
    t.tag = e.tag;
    t.asleep = e.asleep;
    t.mode = e.mode;
    t.slept_bytes = e.slept_bytes;
    t.backup_bytes = e.backup.bytes();
    for_each_range_of(e.tag, [&](stream_range* r) {
      t.allocated_bytes += r->allocated;
      if (r->asleep) return;
      for (const auto& [first, s] : r->runs.by_first()) t.device_bytes += r->runs.slot(s).length * granule;
    });
    states.push_back(t);
  }
  return states;
}

}  // namespace gpumem
