#include "oom_ring.hpp"

#include <algorithm>
#include <chrono>
#include <unordered_map>

namespace gpumem::torch {

namespace {

std::size_t power_of_two_at_least(std::size_t n) {
  std::size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

event_ring::event_ring(std::size_t capacity)
    : events_(std::max<std::size_t>(capacity, 1)),
      table_(2 * power_of_two_at_least(std::max<std::size_t>(2 * std::max<std::size_t>(capacity, 1), 4096))) {
  int bits = 0;
  while ((std::size_t{1} << bits) < table_.size()) ++bits;
  hash_shift_ = 64 - bits;
}

std::size_t event_ring::home(std::uintptr_t ptr) const noexcept {
  // Fibonacci hashing, the product's top bits: allocations are aligned, so their low bits say little.
  const std::uint64_t h = static_cast<std::uint64_t>(ptr) * 0x9E3779B97F4A7C15ull;
  return static_cast<std::size_t>(h >> hash_shift_);
}

void event_ring::insert(std::uintptr_t ptr, std::uint64_t bytes, std::uintptr_t stream) noexcept {
  if (live_count_ >= table_.size() / 2) {
    live_lost_ = true;
    return;
  }
  const std::size_t mask = table_.size() - 1;
  for (std::size_t i = home(ptr);; i = (i + 1) & mask) {
    if (table_[i].ptr == 0 || table_[i].ptr == ptr) {
      if (table_[i].ptr == 0) ++live_count_;
      table_[i] = entry{ptr, bytes, stream};
      return;
    }
  }
}

bool event_ring::erase(std::uintptr_t ptr, std::uint64_t& bytes) noexcept {
  const std::size_t mask = table_.size() - 1;
  std::size_t i = home(ptr);
  while (table_[i].ptr != ptr) {
    if (table_[i].ptr == 0) return false;
    i = (i + 1) & mask;
  }
  bytes = table_[i].bytes;
  // Backward-shift deletion: move up every later entry of the run that may sit at i.
  std::size_t hole = i;
  for (std::size_t j = (hole + 1) & mask; table_[j].ptr != 0; j = (j + 1) & mask) {
    const std::size_t want = home(table_[j].ptr);
    // j may move to the hole when its home is not in (hole, j], cyclically.
    const bool home_in_between = hole <= j ? (want > hole && want <= j) : (want > hole || want <= j);
    if (!home_in_between) {
      table_[hole] = table_[j];
      hole = j;
    }
  }
  table_[hole] = entry{};
  --live_count_;
  return true;
}

void event_ring::push(const ring_event& e) noexcept {
  events_[static_cast<std::size_t>(recorded_ % events_.size())] = e;
  ++recorded_;
}

void event_ring::record_alloc(const void* ptr, std::uint64_t bytes, const void* stream) noexcept {
  if (ptr == nullptr) return;
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  const auto s = reinterpret_cast<std::uintptr_t>(stream);
  std::lock_guard<std::mutex> lock(mutex_);
  insert(p, bytes, s);
  push(ring_event{bytes, p, s, ring_action::alloc});
}

void event_ring::record_free(const void* ptr, std::uint64_t bytes, const void* stream) noexcept {
  if (ptr == nullptr) return;
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  // erase gives the size it was allocated with (PyTorch's may differ: the library corrects it).
  if (!erase(p, bytes) && !live_lost_) return;  // not one of this ring's blocks (freed twice, or another device's)
  push(ring_event{bytes, p, reinterpret_cast<std::uintptr_t>(stream), ring_action::free});
}

ring_window event_ring::snapshot() const {
  const auto start = std::chrono::steady_clock::now();
  ring_window w;
  std::vector<entry> live_now;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(recorded_, events_.size()));
    w.events.reserve(n);
    const std::uint64_t first = recorded_ - n;
    for (std::uint64_t k = first; k < recorded_; ++k) w.events.push_back(events_[static_cast<std::size_t>(k % events_.size())]);
    w.recorded = recorded_;
    w.overflowed = recorded_ > events_.size();
    w.live_known = !live_lost_;
    if (live_lost_) {
      w.copy_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      return w;
    }
    live_now.reserve(live_count_);
    for (const entry& e : table_) {
      if (e.ptr != 0) live_now.push_back(e);
    }
  }
  // Walk the window back from now: before an allocation its block was not live, before a free it was.
  std::unordered_map<std::uintptr_t, live_block> live;
  live.reserve(live_now.size() + w.events.size() / 2);
  for (const entry& e : live_now) live[e.ptr] = live_block{e.ptr, e.bytes, e.stream};
  for (auto it = w.events.rbegin(); it != w.events.rend(); ++it) {
    if (it->action == ring_action::alloc) live.erase(it->ptr);
    else live[it->ptr] = live_block{it->ptr, it->bytes, it->stream};
  }
  w.live_at_start.reserve(live.size());
  for (const auto& kv : live) w.live_at_start.push_back(kv.second);
  // In address order: a replay that seeds them allocates in a stable order.
  std::sort(w.live_at_start.begin(), w.live_at_start.end(),
            [](const live_block& a, const live_block& b) { return a.ptr < b.ptr; });
  w.copy_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return w;
}

}  // namespace gpumem::torch
