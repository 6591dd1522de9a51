// tiered_resource: taking and freeing blocks (the cache of freed blocks by tier and size, a block
// created on a tier and released), the statistics and the out-of-memory errors. See tiered_impl.hpp.
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

void* tiered_resource::impl::allocate(std::size_t bytes, stream_handle stream) {
  std::lock_guard<std::mutex> lock(mutex);
  const tag_id tag = current_tag();
  book.on_allocate(tag);  // throws invalid_state while the tag sleeps, before anything is done
  const placement_choice choice = this->choice.load(std::memory_order_relaxed);
  if (bytes > std::numeric_limits<std::size_t>::max() - granule) {
    throw_oom(bytes, "the request is larger than any block can be");
  }
  const std::size_t size = (bytes + granule - 1) / granule * granule;
  std::string why;
  for (placement t : {placement::device, placement::host}) {
    if ((t == placement::device && choice == placement_choice::host) ||
        (t == placement::host && choice == placement_choice::device)) {
      continue;
    }
    const auto cached_block = find_cached(t, size, stream);
    if (cached_block != cache.end()) return take_cached(cached_block, bytes, stream, tag);
    // Where a new block would need cached blocks released to fit the budget, a cached block up
    // to `larger_reuse` times the size serves instead (what a pool's split would give): no
    // driver calls, and no release of memory that the next request of that size wants back.
    if (reserved[index(t)] + size > budget[index(t)]) {
      const auto larger = find_cached_larger(t, size);
      if (larger != cache.end()) return take_cached(larger, bytes, stream, tag);
    }
    if (void* p = create_block(t, size, bytes, stream, tag, why)) return p;
  }
  if (choice != placement_choice::automatic) {
    why += std::string(why.empty() ? "" : "; ") + "placement '" + placement_choice_name(choice) +
           "' allows that tier only";
  }
  throw_oom(bytes, why);
}

void tiered_resource::impl::deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = live.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == live.end()) throw_unknown_pointer(ptr);
  block& b = it->second;
  if (b.requested != bytes) throw_size_mismatch(ptr, bytes, b.requested);
  if (b.asleep) {
    free_sleeping(it);
    return;
  }
  const std::size_t requested = b.requested;
  // Events on the streams record_stream named (not the freeing one, which orders its own reuse),
  // so that whoever takes the block next waits for them. An event that cannot be recorded
  // quarantines the block: it is never reused, and released after the device has finished.
  std::vector<event_handle> events;
  const bool quarantined = !detail::record_use_events(*ordering, b.used_on, stream, events);
  block freed = std::move(b);
  freed.requested = 0;
  freed.stream = stream;
  freed.stream_done = false;
  freed.quarantined = quarantined;
  freed.used_on.clear();
  freed.events = std::move(events);
  freed.age = next_age++;
  const placement t = freed.tier;
  const std::size_t size = freed.size;
  live.erase(it);
  try {
    cache.emplace(cache_key{index(t), size}, std::move(freed));
    cached[index(t)] += size;
  } catch (...) {
    // No room to cache it (bad_alloc): give it back now, after its work.
    wait_idle(freed);
    give_back(freed);
    reserved[index(t)] -= size;
    counter.on_release(size);
  }
  counter.on_deallocate(requested);
  if (t == placement::host) host_allocated -= requested;
}

void tiered_resource::impl::record_stream(void* ptr, stream_handle stream) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = live.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == live.end()) throw_unknown_pointer(ptr);
  block& b = it->second;
  if (stream == b.stream || std::find(b.used_on.begin(), b.used_on.end(), stream) != b.used_on.end()) return;
  b.used_on.push_back(stream);
}

// A cached block of `size` on tier `t` for `stream`: one freed on `stream` (or whose stream is
// gone) first, else the oldest freed on another stream; end() when there is none.
block_cache::iterator tiered_resource::impl::find_cached(placement t, std::size_t size, stream_handle stream) {
  auto [first, last] = cache.equal_range(cache_key{index(t), size});
  block_cache::iterator other = cache.end();
  for (auto it = first; it != last; ++it) {
    const block& b = it->second;
    if (b.quarantined) continue;
    if (b.stream == stream || b.stream_done) return it;
    if (other == cache.end()) other = it;
  }
  return other;
}

// The smallest usable cached block on tier `t` larger than `size` and at most larger_reuse
// times it; end() when there is none.
block_cache::iterator tiered_resource::impl::find_cached_larger(placement t, std::size_t size) {
  const std::size_t most = size > std::numeric_limits<std::size_t>::max() / larger_reuse ? size : size * larger_reuse;
  for (auto it = cache.upper_bound(cache_key{index(t), size}); it != cache.end(); ++it) {
    if (it->first.first != index(t) || it->first.second > most) break;
    if (!it->second.quarantined) return it;
  }
  return cache.end();
}

void* tiered_resource::impl::take_cached(block_cache::iterator it, std::size_t bytes, stream_handle stream, tag_id tag) {
  block& b = it->second;
  // Stream order: work queued on the freeing stream (and on the streams record_stream named) may
  // still use the block; `stream` waits for it on the device, not the host.
  if (!b.stream_done && b.stream != stream) order_after(*ordering, stream, b.stream);
  for (event_handle e : b.events) ordering->wait(stream, e);
  for (event_handle e : b.events) ordering->release(e);
  b.events.clear();
  auto [slot, inserted] = live.emplace(b.base, block{});
  (void)inserted;
  block& taken = slot->second;
  taken = std::move(b);
  cache.erase(it);
  taken.requested = bytes;
  taken.stream = stream;
  taken.stream_done = false;
  taken.tag = tag;
  cached[index(taken.tier)] -= taken.size;
  on_allocated(taken.tier, bytes);
  return reinterpret_cast<void*>(taken.base);
}

// A new block on tier `t`, or nullptr (with why appended) when its budget or the driver refuses
// even after the tier's cached blocks are released. Other failures throw, leaving nothing behind.
void* tiered_resource::impl::create_block(placement t, std::size_t size, std::size_t bytes, stream_handle stream, tag_id tag,
                   std::string& why) {
  if (!make_room(t, size, why)) return nullptr;
  vmm::handle h = 0;
  try {
    h = create_with_retry(t, size);
  } catch (const out_of_memory& e) {
    append(why, e.reason());
    return nullptr;
  }
  void* base = nullptr;
  try {
    base = memory->reserve(size);
    try {
      memory->map(base, size, h, t);
    } catch (...) {
      memory->free_range(base, size);
      throw;
    }
  } catch (const out_of_memory& e) {
    memory->release(h);
    append(why, e.reason());
    return nullptr;
  } catch (...) {
    memory->release(h);
    throw;
  }
  const auto key = reinterpret_cast<std::uintptr_t>(base);
  try {
    block& b = live.emplace(key, block{}).first->second;
    b.base = key;
    b.size = size;
    b.tier = t;
    b.handle = h;
    b.requested = bytes;
    b.stream = stream;
    b.tag = tag;
  } catch (...) {
    memory->unmap(base, size);
    memory->free_range(base, size);
    memory->release(h);
    throw;
  }
  on_reserved(t, size);
  on_allocated(t, bytes);
  return base;
}

// Whether tier `t` can take `size` more bytes within its budget, releasing its cached blocks
// (oldest first) as far as that needs; false (with why appended, nothing released) when the
// blocks in use leave no room.
bool tiered_resource::impl::make_room(placement t, std::uint64_t size, std::string& why) {
  const std::size_t i = index(t);
  const std::uint64_t in_use = reserved[i] - cached[i];
  if (size > budget[i] || in_use > budget[i] - size) {
    append(why, std::string("the ") + placement_name(t) + " budget of " + format_bytes_brief(budget[i]) + " has " +
                    format_bytes_brief(budget[i] > in_use ? budget[i] - in_use : 0) + " left beside the blocks in use");
    return false;
  }
  if (reserved[i] + size > budget[i]) release_cached(&t, reserved[i] + size - budget[i]);
  return true;
}

// One physical allocation on tier `t`; when the driver refuses, every cached block of that tier
// is released and the call tried once more. Throws out_of_memory when it still fails.
vmm::handle tiered_resource::impl::create_with_retry(placement t, std::size_t size) {
  try {
    return memory->create(size, t);
  } catch (const out_of_memory&) {
    if (release_cached(&t, std::numeric_limits<std::uint64_t>::max()) == 0) throw;
  }
  return memory->create(size, t);
}

// Releases cached blocks (of tier *t, or of both when t is null), oldest first, until at least
// `at_least` bytes are released or none is left. Returns the bytes released.
std::uint64_t tiered_resource::impl::release_cached(const placement* t, std::uint64_t at_least) {
  std::vector<block_cache::iterator> candidates;
  for (auto it = cache.begin(); it != cache.end(); ++it) {
    if (t == nullptr || it->first.first == index(*t)) candidates.push_back(it);
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const block_cache::iterator& a, const block_cache::iterator& b) { return a->second.age < b->second.age; });
  std::uint64_t released = 0;
  for (auto it : candidates) {
    if (released >= at_least) break;
    block& b = it->second;
    wait_idle(b);
    give_back(b);
    reserved[index(b.tier)] -= b.size;
    cached[index(b.tier)] -= b.size;
    counter.on_release(b.size);
    released += b.size;
    cache.erase(it);
  }
  return released;
}

// Waits on the host until no work queued before the block was freed can still use it.
void tiered_resource::impl::wait_idle(block& b) noexcept {
  bool waited = !b.quarantined;
  try {
    if (waited && !b.stream_done) detail::synchronize_stream(*ordering, b.stream);
    for (event_handle e : b.events) ordering->synchronize(e);
  } catch (...) {
    waited = false;
  }
  for (event_handle e : b.events) ordering->release(e);
  b.events.clear();
  if (!waited) memory->synchronize_device();
}

// Unmaps and releases the block's memory (a sleeping block has none) and frees its range. Never
// throws.
void tiered_resource::impl::give_back(block& b) noexcept {
  void* base = reinterpret_cast<void*>(b.base);
  if (!b.asleep) {
    memory->unmap(base, b.size);
    memory->release(b.handle);
  }
  memory->free_range(base, b.size);
}

void tiered_resource::impl::on_reserved(placement t, std::size_t size) noexcept {
  reserved[index(t)] += size;
  counter.on_reserve(size);
  if (t == placement::host) peak_host_reserved = std::max(peak_host_reserved, reserved[index(t)]);
}

void tiered_resource::impl::on_allocated(placement t, std::size_t bytes) noexcept {
  counter.on_allocate(bytes);
  if (t == placement::host) {
    host_allocated += bytes;
    peak_host_allocated = std::max(peak_host_allocated, host_allocated);
  }
}

resource_stats tiered_resource::impl::stats() const {
  resource_stats s = counter.get();
  std::uint64_t largest = 0;
  const auto host_first = cache.lower_bound(cache_key{index(placement::host), 0});
  if (host_first != cache.begin()) largest = std::prev(host_first)->first.second;  // the largest device block
  if (!cache.empty() && cache.rbegin()->first.first == index(placement::host)) {
    largest = std::max<std::uint64_t>(largest, cache.rbegin()->first.second);
  }
  s.largest_free_block = static_cast<std::int64_t>(largest);
  s.host_allocated_bytes = static_cast<std::int64_t>(host_allocated);
  s.peak_host_allocated_bytes = static_cast<std::int64_t>(peak_host_allocated);
  s.host_reserved_bytes = static_cast<std::int64_t>(reserved[index(placement::host)]);
  s.peak_host_reserved_bytes = static_cast<std::int64_t>(peak_host_reserved);
  s.bytes_moved_to_host = moved_to_host;
  s.bytes_moved_to_device = moved_to_device;
  return s;
}

[[noreturn]] void tiered_resource::impl::throw_oom(std::size_t bytes, const std::string& why) {
  counter.on_oom();
  throw out_of_memory("tiered: could not allocate " + format_bytes(bytes) + ": " + why, bytes, stats());
}

void tiered_resource::impl::append(std::string& why, const std::string& reason) {
  if (!why.empty()) why += "; ";
  why += reason;
}

void tiered_resource::impl::on_stream_destroyed(stream_handle gone) noexcept {
  std::lock_guard<std::mutex> lock(mutex);
  for (auto& [key, b] : cache) {
    (void)key;
    if (b.stream == gone) b.stream_done = true;  // synchronised: nothing queued on it still runs
  }
  for (auto& [base, b] : live) {
    (void)base;
    auto& on = b.used_on;
    on.erase(std::remove(on.begin(), on.end(), gone), on.end());
    if (b.stream == gone) b.stream = nullptr;
  }
}

}  // namespace gpumem
