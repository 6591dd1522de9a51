// tiered_resource: sleep and wake by tag (gpumem/sleep.hpp). See tiered_impl.hpp.
#include "tiered_impl.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpumem {

namespace {

// A sleep or wake option 'expandable' offers and tiered does not, refused before anything changes.
[[noreturn]] void throw_not_offered(const std::string& option, const char* why) {
  throw invalid_argument(invalid_argument::kind::range, option,
                         "tiered: " + option + " is not offered (" + why + "); 'expandable' offers it");
}

}  // namespace

// A free of a sleeping block: nothing is mapped, so its range is freed as it is, and its saved
// copy is dropped; its physical bytes were counted as released when it slept.
void tiered_resource::impl::free_sleeping(std::map<std::uintptr_t, block>::iterator it) noexcept {
  block& b = it->second;
  if (detail::tag_book::entry* e = book.find(b.tag)) {
    e->backup.forget(reinterpret_cast<const void*>(b.base), b.requested);
    e->slept_bytes -= std::min<std::uint64_t>(e->slept_bytes, b.size);
  }
  counter.on_deallocate(b.requested);
  memory->free_range(reinterpret_cast<void*>(b.base), b.size);
  live.erase(it);
}

// Gives back block `b` of the device tier that sleep or a failed wake releases: unmapped, its
// memory released, its range kept.
void tiered_resource::impl::put_to_sleep(block& b) noexcept {
  memory->unmap(reinterpret_cast<void*>(b.base), b.size);
  memory->release(b.handle);
  b.handle = 0;
  b.asleep = true;
  reserved[index(placement::device)] -= b.size;
  counter.on_release(b.size);
}

// Throws invalid_state when [ptr, ptr + bytes) overlaps a live block whose tag sleeps.
void tiered_resource::impl::check_awake(const void* ptr, std::size_t bytes) const {
  const std::uintptr_t lo = reinterpret_cast<std::uintptr_t>(ptr);
  const std::uintptr_t hi = lo + std::max<std::size_t>(bytes, 1);
  auto it = live.upper_bound(lo);
  if (it != live.begin()) --it;
  for (; it != live.end() && it->first < hi; ++it) {
    const block& b = it->second;
    if (!b.asleep || it->first + b.size <= lo) continue;
    throw invalid_state("tiered: the memory at " + format_pointer(ptr) + " belongs to tag '" + tag_name(b.tag) +
                        "', which is asleep: wake it before reading or writing it");
  }
}

sleep_report tiered_resource::impl::sleep(const sleep_request& request) {
  const auto start = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex);
  sleep_report report;
  if (request.keep_cache) {
    throw_not_offered("keep_cache", "its cached device blocks are released at sleep and not mapped again");
  }
  const std::vector<std::pair<tag_id, sleep_mode>> plan = book.plan_sleep(request, report, "tiered");
  engine.begin_timing();
  // Per tag: the live device-tier blocks (the units, by address) and, where it keeps, their bytes.
  struct tag_work {
    tag_id tag = default_tag;
    sleep_mode mode = sleep_mode::keep;
    std::vector<detail::sleep_unit> units;
    std::vector<detail::sleep_span> spans;
    std::uint64_t span_bytes = 0;
    detail::sleep_backup backup;
  };
  std::vector<tag_work> work(plan.size());
  std::unordered_map<tag_id, std::size_t> slot;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    work[i].tag = plan[i].first;
    work[i].mode = plan[i].second;
    slot.emplace(plan[i].first, i);
  }
  for (auto& [base, b] : live) {
    if (b.tier != placement::device || b.asleep) continue;
    const auto s = slot.find(b.tag);
    if (s == slot.end()) continue;
    tag_work& w = work[s->second];
    void* addr = reinterpret_cast<void*>(base);
    w.units.push_back({addr, b.size});
    if (w.mode == sleep_mode::keep) {
      w.spans.push_back({addr, b.requested});
      w.span_bytes += b.requested;
    }
  }
  // Host memory for every backup first: when the host is short, nothing has been released.
  try {
    for (tag_work& w : work) {
      if (w.span_bytes > 0) w.backup = engine.reserve(w.span_bytes, stats());
    }
  } catch (...) {
    for (tag_work& w : work) engine.recycle(w.backup);
    throw;
  }
  if (work.empty()) {
    report.timing = engine.end_timing();
    report.seconds = seconds_since(start);
    return report;
  }
  engine.quiesce();
  for (std::size_t i = 0; i < work.size(); ++i) {
    tag_work& w = work[i];
    detail::tag_book::entry* entry = book.find(w.tag);
    std::uint64_t slept = 0;
    try {
      if (!w.units.empty()) {
        engine.save_and_release(
            w.backup, w.spans, w.units,
            [&](const detail::sleep_unit& u) {
              block& b = block_at(u.addr);
              put_to_sleep(b);
              slept += b.size;
            },
            stats());
      }
    } catch (...) {
      // Nothing released (a copy that could not be queued, or pinned memory the host refused past
      // what reserve() granted): the tag stays awake, its cached blocks too. Units released (a
      // copy that failed while running): it sleeps, the content of the failed copies lost, never
      // the addresses. The tags before it sleep; those after it stay awake.
      if (slept > 0) {
        const std::uint64_t cached = release_cached_of([&w](tag_id t) { return t == w.tag; });
        settle_asleep(*entry, w.mode, slept + cached, w.backup);
      } else {
        engine.recycle(w.backup);
      }
      for (std::size_t j = i + 1; j < work.size(); ++j) engine.recycle(work[j].backup);
      throw;
    }
    // What the tag's sleep released, its cached blocks included (tag_state::slept_bytes).
    const std::uint64_t cached = release_cached_of([&w](tag_id t) { return t == w.tag; });
    settle_asleep(*entry, w.mode, slept + cached, w.backup);
    report.changed.push_back(w.tag);
    report.device_bytes += slept + cached;
    report.copied_bytes += w.span_bytes;
  }
  report.timing = engine.end_timing();
  report.seconds = seconds_since(start);
  return report;
}

void tiered_resource::impl::settle_asleep(detail::tag_book::entry& entry, sleep_mode mode, std::uint64_t slept,
                   detail::sleep_backup& backup) {
  engine.recycle(entry.backup);  // empty after a wake; a discarded backup of an earlier sleep otherwise
  entry.asleep = true;
  entry.mode = mode;
  entry.slept_bytes = slept;
  entry.backup = std::move(backup);
}

sleep_report tiered_resource::impl::wake(const wake_request& request) {
  const auto start = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex);
  sleep_report report;
  if (request.retain_backup) throw_not_offered("retain_backup", "a woken tag's backup goes back to the pool");
  const std::vector<tag_id> plan = book.plan_wake(request.tags, report, "tiered");
  std::unordered_map<tag_id, std::vector<detail::sleep_unit>> units;
  std::uint64_t need = 0;
  for (auto& [base, b] : live) {
    if (!b.asleep || std::find(plan.begin(), plan.end(), b.tag) == plan.end()) continue;
    units[b.tag].push_back({reinterpret_cast<void*>(base), b.size});
    need += b.size;
  }
  // The device budget for them all first: when it is short, nothing is mapped.
  std::string why;
  if (need > 0 && !make_room(placement::device, need, why)) throw_wake_oom(plan, need, why);
  // Tag by tag: when the driver refuses one, the tags before it are awake, it and those after it
  // asleep with their backups whole.
  for (tag_id tag : plan) {
    detail::tag_book::entry* entry = book.find(tag);
    const std::vector<detail::sleep_unit>& mine = units[tag];
    const std::uint64_t copied = entry->backup.saved_bytes();
    std::uint64_t mapped = 0;
    if (mine.empty()) {
      engine.recycle(entry->backup);
    } else {
      try {
        engine.map_and_restore(
            entry->backup, mine,
            [&](const detail::sleep_unit& u) {
              block& b = block_at(u.addr);
              const vmm::handle h = create_with_retry(placement::device, b.size);
              try {
                memory->map(u.addr, b.size, h, placement::device);
              } catch (...) {
                memory->release(h);
                throw;
              }
              b.handle = h;
              b.asleep = false;
              on_reserved(placement::device, b.size);
              mapped += b.size;
            },
            [&](const detail::sleep_unit& u) {
              block& b = block_at(u.addr);
              put_to_sleep(b);
              mapped -= b.size;
            });
      } catch (const out_of_memory& e) {
        throw_wake_oom({tag}, e.requested_bytes(), e.reason());
      }
      engine.recycle(entry->backup);
    }
    entry->asleep = false;
    entry->slept_bytes = 0;
    report.changed.push_back(tag);
    report.device_bytes += mapped;
    report.copied_bytes += copied;
  }
  report.seconds = seconds_since(start);
  return report;
}

[[noreturn]] void tiered_resource::impl::throw_wake_oom(const std::vector<tag_id>& tags, std::uint64_t bytes, const std::string& why) {
  std::string names;
  for (tag_id t : tags) names += (names.empty() ? "'" : ", '") + tag_name(t) + "'";
  counter.on_oom();
  const bool one = tags.size() == 1;
  throw out_of_memory("tiered: could not wake " + std::string(one ? "tag " : "tags ") + names + " (" +
                          format_bytes(bytes) + " of device memory): " + why + (one ? "; it stays" : "; they stay") +
                          " asleep",
                      bytes, stats());
}

std::vector<tag_state> tiered_resource::impl::tag_states() const {
  std::vector<tag_state> out;
  std::unordered_map<tag_id, std::size_t> slot;
  for (const detail::tag_book::entry& e : book.entries()) {
    tag_state s;
    s.tag = e.tag;
    s.asleep = e.asleep;
    s.mode = e.mode;
    s.slept_bytes = e.asleep ? e.slept_bytes : 0;
    s.backup_bytes = e.backup.bytes();
    slot.emplace(e.tag, out.size());
    out.push_back(s);
  }
  for (const auto& [base, b] : live) {
    (void)base;
    const auto s = slot.find(b.tag);
    if (s == slot.end()) continue;
    out[s->second].allocated_bytes += b.requested;
    if (b.tier == placement::device && !b.asleep) out[s->second].device_bytes += b.size;
  }
  for (const auto& [key, b] : cache) {
    const auto s = slot.find(b.tag);
    if (key.first == index(placement::device) && s != slot.end()) out[s->second].device_bytes += b.size;
  }
  return out;
}

}  // namespace gpumem
