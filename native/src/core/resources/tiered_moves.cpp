// tiered_resource: prefetch, moving blocks between the tiers at the same address (create on the
// other tier, map at a temporary range, copy, remap). See tiered_impl.hpp.
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

bool tiered_resource::impl::prefetch(void* ptr, std::size_t bytes, placement target, stream_handle stream) {
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<block*> movers;
  std::uint64_t need = 0;
  const std::vector<block*> blocks = covering(ptr, bytes);
  for (const block* b : blocks) {
    if (book.asleep(b->tag)) {
      throw invalid_state("tiered: tag '" + tag_name(b->tag) + "' is asleep: wake it before prefetching its blocks");
    }
  }
  for (block* b : blocks) {
    if (b->tier == target) continue;
    movers.push_back(b);
    need += b->size;
  }
  if (movers.empty()) return true;
  std::string why;
  if (!make_room(target, need, why)) return false;
  // Every target allocation first, so that a refusal changes no block.
  std::vector<vmm::handle> fresh;
  fresh.reserve(movers.size());
  std::size_t largest = 0;
  void* temp = nullptr;
  try {
    for (block* b : movers) {
      fresh.push_back(create_with_retry(target, b->size));
      largest = std::max(largest, b->size);
    }
    temp = memory->reserve(largest);
  } catch (const out_of_memory&) {
    for (vmm::handle h : fresh) memory->release(h);
    return false;
  } catch (...) {
    for (vmm::handle h : fresh) memory->release(h);
    throw;
  }
  for (block* b : movers) on_reserved(target, b->size);
  std::size_t i = 0;
  try {
    for (; i < movers.size(); ++i) move_block(*movers[i], fresh[i], target, temp, stream);
  } catch (...) {
    for (std::size_t j = i; j < movers.size(); ++j) {  // not taken by a block
      memory->release(fresh[j]);
      reserved[index(target)] -= movers[j]->size;
      counter.on_release(movers[j]->size);
    }
    memory->free_range(temp, largest);
    throw;
  }
  memory->free_range(temp, largest);
  return true;
}

// The live blocks [ptr, ptr + bytes) lies in (bytes 0: the one ptr is in). Throws
// invalid_argument for a pointer in no live block (type) or a range that leaves them (range).
std::vector<block*> tiered_resource::impl::covering(void* ptr, std::size_t bytes) {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  auto it = live.upper_bound(p);
  if (it == live.begin()) throw_unknown_pointer(ptr);
  --it;
  if (p - it->first >= it->second.size) throw_unknown_pointer(ptr);
  const std::uintptr_t end = bytes > std::numeric_limits<std::uintptr_t>::max() - p ? 0 : p + std::max<std::size_t>(bytes, 1);
  std::vector<block*> out;
  for (;;) {
    out.push_back(&it->second);
    const std::uintptr_t block_end = it->first + it->second.size;
    if (end != 0 && end <= block_end) return out;
    ++it;
    if (end == 0 || it == live.end() || it->first != block_end) {
      throw invalid_argument(invalid_argument::kind::range, "bytes",
                             "Expected [ptr, ptr + bytes) to lie in live allocations but " + format_pointer(ptr) +
                                 " + " + std::to_string(bytes) + " runs past the allocation at " +
                                 format_pointer(reinterpret_cast<void*>(out.back()->base)));
    }
  }
}

// Moves block `b` to `target`'s physical allocation `fresh`, at the same address: map `fresh` at
// `temp`, copy on `stream` after the streams `b` was used on, wait, then swap the mappings at b's
// address. On a throw `b` is as it was and `fresh` is not taken.
void tiered_resource::impl::move_block(block& b, vmm::handle fresh, placement target, void* temp, stream_handle stream) {
  void* base = reinterpret_cast<void*>(b.base);
  memory->map(temp, b.size, fresh, target);
  try {
    if (b.stream != stream) order_after(*ordering, stream, b.stream);
    for (stream_handle s : b.used_on) {
      if (s != stream) order_after(*ordering, stream, s);
    }
    memory->copy(temp, base, b.requested, stream);
    memory->synchronize(stream);
  } catch (...) {
    memory->unmap(temp, b.size);
    throw;
  }
  memory->unmap(temp, b.size);
  memory->unmap(base, b.size);
  try {
    memory->map(base, b.size, fresh, target);
  } catch (...) {
    try {
      memory->map(base, b.size, b.handle, b.tier);  // put the old memory back
    } catch (...) {
    }
    throw;
  }
  memory->release(b.handle);
  reserved[index(b.tier)] -= b.size;
  counter.on_release(b.size);
  if (target == placement::host) {
    host_allocated += b.requested;
    peak_host_allocated = std::max(peak_host_allocated, host_allocated);
    moved_to_host += b.requested;
  } else {
    host_allocated -= b.requested;
    moved_to_device += b.requested;
  }
  b.tier = target;
  b.handle = fresh;
}

}  // namespace gpumem
