#include "oom_report.hpp"

#include <chrono>
#include <cstdio>
#include <exception>
#include <new>
#include <unordered_map>

#include "gpumem/errors.hpp"
#include "gpumem/strategy_registry.hpp"
#include "replay_twins.hpp"
#include "trace_recorder.hpp"  // json_quote

namespace gpumem::torch {

namespace {

using clock_type = std::chrono::steady_clock;

// Why each device strategy that is not replayed is not, where its descriptor says.
const std::vector<std::string>& unreplayable() {
  static const std::vector<std::string> v = [] {
    std::vector<std::string> out;
    for (const strategy_descriptor* d : strategies()) {
      if (!d->no_address_only.empty()) out.push_back(d->name + ": " + d->no_address_only);
    }
    return out;
  }();
  return v;
}

std::string with_commas(std::uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms < 10 ? "%.1f" : "%.0f", ms);
  return buf;
}

// One op of the program: seeded blocks and the window's events on slots, the request last.
struct op {
  bool alloc;
  std::uint32_t slot;
  std::uint64_t bytes;
  std::uintptr_t stream;
};

struct program {
  std::vector<op> ops;
  std::size_t slots = 0;
};

program compile(const ring_window& w, std::uint64_t request_bytes, std::uintptr_t request_stream) {
  program p;
  p.ops.reserve(w.live_at_start.size() + w.events.size() + 1);
  std::unordered_map<std::uintptr_t, std::uint32_t> slot_of;
  slot_of.reserve(w.live_at_start.size() + w.events.size() / 2 + 1);
  std::vector<std::uint32_t> free_slots;
  auto take = [&]() -> std::uint32_t {
    if (!free_slots.empty()) {
      const std::uint32_t s = free_slots.back();
      free_slots.pop_back();
      return s;
    }
    return static_cast<std::uint32_t>(p.slots++);
  };
  auto alloc = [&](std::uintptr_t ptr, std::uint64_t bytes, std::uintptr_t stream) {
    if (bytes == 0 || slot_of.count(ptr) != 0) return;
    const std::uint32_t s = take();
    slot_of.emplace(ptr, s);
    p.ops.push_back(op{true, s, bytes, stream});
  };
  for (const live_block& b : w.live_at_start) alloc(b.ptr, b.bytes, b.stream);
  for (const ring_event& e : w.events) {
    if (e.action == ring_action::alloc) {
      alloc(e.ptr, e.bytes, e.stream);
      continue;
    }
    auto it = slot_of.find(e.ptr);
    if (it == slot_of.end()) continue;
    p.ops.push_back(op{false, it->second, e.bytes, e.stream});
    free_slots.push_back(it->second);
    slot_of.erase(it);
  }
  p.ops.push_back(op{true, static_cast<std::uint32_t>(take()), request_bytes, request_stream});
  return p;
}

// Runs the program on `name`'s twin until it ends or `deadline` passes.
replay_outcome run(const std::string& name, const program& prog, const oom_context& c, clock_type::time_point deadline) {
  replay_outcome r;
  r.strategy = name;
  try {
    replay_twin twin = make_replay_twin(name, c.capacity_bytes, c.configured);
    memory_resource& m = twin.top();
    std::vector<void*> ptr(prog.slots, nullptr);
    std::vector<std::uint64_t> size(prog.slots, 0);
    for (std::size_t i = 0; i < prog.ops.size(); ++i) {
      if ((i & 63) == 0 && clock_type::now() >= deadline) return r;
      const op& o = prog.ops[i];
      const auto stream = reinterpret_cast<stream_handle>(o.stream);
      const bool last = i + 1 == prog.ops.size();
      if (o.alloc) {
        try {
          ptr[o.slot] = m.allocate(static_cast<std::size_t>(o.bytes), stream);
          size[o.slot] = o.bytes;
          if (last) r.request_fits = true;
        } catch (const out_of_memory&) {
          ++r.ooms;
        }
      } else if (ptr[o.slot] != nullptr) {
        m.deallocate(ptr[o.slot], static_cast<std::size_t>(size[o.slot]), stream);
        ptr[o.slot] = nullptr;
      }
    }
    r.peak_reserved_bytes = m.stats().peak_reserved_bytes;
    r.finished = true;
    r.fits = r.ooms == 0;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

}  // namespace

const char* verdict_name(oom_verdict v) noexcept {
  switch (v) {
    case oom_verdict::real:
      return "real";
    case oom_verdict::fragmentation:
      return "fragmentation";
    default:
      return "unknown";
  }
}

oom_report make_oom_report(const oom_context& context, const ring_window* window) {
  oom_report r;
  r.context = context;
  const oom_context& c = r.context;
  r.not_replayed = unreplayable();
  if (c.capacity_bytes == 0) r.verdict = oom_verdict::unknown;
  else if (c.live_bytes + c.request_bytes > c.capacity_bytes) r.verdict = oom_verdict::real;
  else r.verdict = oom_verdict::fragmentation;
  if (window != nullptr) r.recorded_events = window->recorded;

  if (c.window == 0) {
    r.skip_reason = "the event ring is off (GPUMEM_OOM_WINDOW=0)";
  } else if (window == nullptr) {
    r.skip_reason = "the event ring could not be made or copied (host memory ran out)";
  } else if (c.replay_ms == 0) {
    r.skip_reason = "the time bound is 0 ms (GPUMEM_OOM_REPLAY_MS=0)";
  } else if (c.capacity_bytes == 0) {
    r.skip_reason = "the capacity is not known";
  } else if (r.verdict == oom_verdict::real) {
    r.skip_reason = "the live bytes and the request exceed the capacity: no strategy can serve it";
  } else if (!window->live_known) {
    r.skip_reason = "more blocks were live at once than the ring's live table holds, so the blocks live at the window's start are not known";
  } else {
    // The copy of the ring counts against the bound too.
    const auto start = clock_type::now();
    const auto deadline = start + std::chrono::duration_cast<clock_type::duration>(
                                      std::chrono::duration<double, std::milli>(static_cast<double>(c.replay_ms) - window->copy_ms));
    const program prog = compile(*window, c.request_bytes, c.request_stream);
    r.window_events = window->events.size();
    r.live_blocks = window->live_at_start.size();
    for (const live_block& b : window->live_at_start) r.live_block_bytes += b.bytes;
    bool timed_out = false;
    for (const std::string& name : replayed_strategies()) {
      if (timed_out) {
        replay_outcome skipped;
        skipped.strategy = name;
        r.strategies.push_back(skipped);
        continue;
      }
      replay_outcome o = run(name, prog, c, deadline);
      timed_out = !o.finished && o.error.empty();
      r.strategies.push_back(std::move(o));
    }
    r.replay_ms = window->copy_ms + std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
    if (timed_out) {
      r.skip_reason = "the time bound of " + std::to_string(c.replay_ms) + " ms (GPUMEM_OOM_REPLAY_MS) ran out";
    } else {
      r.replayed = true;
    }
  }
  return r;
}

std::string oom_report::text() const {
  const oom_context& c = context;
  std::string t;
  if (c.capacity_bytes != 0) {
    t += ", capacity " + format_bytes_brief(c.capacity_bytes) + " (" + c.capacity_source + ")";
  }
  t += ". ";
  const std::string need = "the live bytes (" + format_bytes_brief(c.live_bytes) + ") and the request (" +
                           format_bytes_brief(c.request_bytes) + ")";
  if (verdict == oom_verdict::real) {
    t += "Real: " + need + " exceed the capacity by " +
         format_bytes_brief(c.live_bytes + c.request_bytes - c.capacity_bytes) +
         "; no allocator can serve it: reduce the live bytes (sleep idle tags, placing blocks on the host, activation "
         "checkpointing, a smaller batch).";
    return t;
  }
  if (verdict == oom_verdict::unknown) {
    t += "No verdict: the capacity is not known (host memory without a limit). No replay: " + skip_reason + ".";
    return t;
  }
  t += "Fragmentation: " + need + " fit in the capacity; " + c.strategy + " could not place the request.";
  if (!replayed) {
    t += " No replay: " + skip_reason + ".";
    return t;
  }
  t += " Replayed the last " + with_commas(window_events) + " events over " + with_commas(live_blocks) +
       " blocks live before them (" + ms_text(replay_ms) + " ms):";
  std::string fitting;
  bool own_fits = false;
  for (std::size_t i = 0; i < strategies.size(); ++i) {
    const replay_outcome& o = strategies[i];
    t += i == 0 ? " " : "; ";
    if (!o.error.empty()) {
      t += o.strategy + " could not be replayed (" + o.error + ")";
    } else if (o.fits) {
      t += o.strategy + " would have fit (peak reserved " + format_bytes_brief(o.peak_reserved_bytes) + ")";
      if (o.strategy == c.strategy) own_fits = true;
      else if (fitting.empty()) fitting = o.strategy;
    } else {
      t += o.strategy + " would not";
      if (o.request_fits) t += " (the request fits, " + std::to_string(o.ooms) + " earlier allocations fail)";
    }
  }
  t += ".";
  if (own_fits) {
    t += " " + c.strategy +
         " itself fits in the replay, which starts it with the live blocks packed: the fragmentation built up before the window.";
  }
  if (!fitting.empty()) t += " Try GPUMEM_ALLOCATOR=" + fitting + ".";
  return t;
}

std::string oom_report::json() const {
  const oom_context& c = context;
  auto num = [](std::uint64_t v) { return std::to_string(v); };
  std::string j = "{\"strategy\":" + json_quote(c.strategy) + ",\"instance\":" + std::to_string(c.instance) +
                  ",\"device\":" + std::to_string(c.device) +
                  ",\"requestBytes\":" + num(c.request_bytes) + ",\"liveBytes\":" + num(c.live_bytes) +
                  ",\"reservedBytes\":" + num(c.reserved_bytes) + ",\"largestFreeBlock\":" +
                  (c.largest_free_block < 0 ? std::string("null") : std::to_string(c.largest_free_block)) +
                  ",\"capacityBytes\":" + (c.capacity_bytes == 0 ? std::string("null") : num(c.capacity_bytes)) +
                  ",\"capacitySource\":" + (c.capacity_bytes == 0 ? std::string("null") : json_quote(c.capacity_source)) +
                  ",\"verdict\":" + json_quote(verdict_name(verdict)) + ",\"window\":" + num(c.window) +
                  ",\"timeBoundMs\":" + num(c.replay_ms) + ",\"recordedEvents\":" + num(recorded_events) +
                  ",\"replayed\":" + (replayed ? "true" : "false") +
                  ",\"skipReason\":" + (skip_reason.empty() ? std::string("null") : json_quote(skip_reason)) +
                  ",\"windowEvents\":" + num(window_events) + ",\"liveBlocks\":" + num(live_blocks) +
                  ",\"liveBlockBytes\":" + num(live_block_bytes) + ",\"replayMs\":" + ms_text(replay_ms) +
                  ",\"strategies\":[";
  for (std::size_t i = 0; i < strategies.size(); ++i) {
    const replay_outcome& o = strategies[i];
    j += std::string(i ? "," : "") + "{\"strategy\":" + json_quote(o.strategy) +
         ",\"finished\":" + (o.finished ? "true" : "false") + ",\"fits\":" + (o.fits ? "true" : "false") +
         ",\"requestFits\":" + (o.request_fits ? "true" : "false") + ",\"ooms\":" + num(o.ooms) +
         ",\"peakReservedBytes\":" + num(o.peak_reserved_bytes) +
         ",\"error\":" + (o.error.empty() ? std::string("null") : json_quote(o.error)) + "}";
  }
  j += "],\"notReplayed\":[";
  for (std::size_t i = 0; i < not_replayed.size(); ++i) j += std::string(i ? "," : "") + json_quote(not_replayed[i]);
  j += "],\"text\":" + json_quote(text()) + "}";
  return j;
}

}  // namespace gpumem::torch
