// caching_resource: expandable segments, one virtual range per pool and stream whose pages are mapped
// and unmapped through the VMM primitive (vmm_runs.hpp). See caching_impl.hpp.
#include "caching_impl.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpumem {

bool caching_resource::impl::try_allocate_expandable_block(params& p) {
  cblock* candidate = find_expandable_block(p);
  if (candidate == nullptr) return false;
  if (!candidate->mapped && !map_block(candidate, std::min(candidate->size, p.size), p)) return false;
  while (candidate->size < p.size) {
    // candidate is free and mapped, followed by unmapped room
    cblock* next = candidate->next;
    if (!map_block(next, std::min(p.size - candidate->size, next->size), p)) return false;
    candidate = next;  // map_block merged the two
  }
  p.pool->blocks.erase(candidate);
  p.block = candidate;
  return true;
}

// A free/unmapped run of the request's stream and pool with room for it, or a new segment's range.
cblock* caching_resource::impl::find_expandable_block(params& p) {
  block_pool& pool = *p.pool;
  auto has_room = [&](const cblock* b) {
    std::size_t bytes = 0;
    while (bytes < p.size && allocatable(b)) {
      bytes += b->size;
      b = b->next;
    }
    return bytes >= p.size;
  };
  cblock key = key_of(p.stream, 0);
  for (auto it = pool.unmapped.lower_bound(&key); it != pool.unmapped.end() && (*it)->stream == p.stream; ++it) {
    cblock* c = *it;
    if (allocatable(c->prev)) c = c->prev;
    if (has_room(c)) return c;
  }
  const std::size_t page = pool.small ? small_buffer : large_buffer;
  std::size_t space = options.expandable_address_space_bytes;
  if (space == 0) {
    const std::uint64_t total = memory->total_bytes();
    space = total > 0 ? static_cast<std::size_t>(total + total / 8) : default_host_address_space;
  }
  space = std::max((space + page - 1) / page * page, (p.size + page - 1) / page * page);
  auto seg = std::make_unique<expandable_segment>();
  try {
    seg->base = reinterpret_cast<std::uintptr_t>(memory->reserve_range(space));
  } catch (const out_of_memory& e) {
    p.failure = std::string("no address range: ") + e.reason();
    return nullptr;
  }
  seg->size = space;
  seg->page = page;
  seg->stream = p.stream;
  seg->order = next_order++;
  seg->mapped.assign(space / page, false);
  auto* c = new cblock;
  c->stream = p.stream;
  c->size = space;
  c->ptr = seg->base;
  c->pool = &pool;
  c->order = seg->order;
  c->mapped = false;
  c->segment = seg.get();
  expandables.push_back(std::move(seg));
  pool.unmapped.insert(c);
  return c;
}

// Maps the pages under [ptr, ptr + size): all of them or, on failure, none.
range caching_resource::impl::map_pages(expandable_segment& seg, std::uintptr_t ptr, std::size_t size, std::string& failure) {
  const std::size_t begin = (ptr - seg.base) / seg.page;
  const std::size_t end = (ptr + size - seg.base + seg.page - 1) / seg.page;
  for (std::size_t i = begin; i < end; ++i) {
    try {
      memory->map_run(reinterpret_cast<void*>(seg.base + i * seg.page), seg.page);
    } catch (const out_of_memory& e) {
      failure = std::string("mapping a page: ") + e.reason();
      for (std::size_t j = begin; j < i; ++j) memory->unmap_run(reinterpret_cast<void*>(seg.base + j * seg.page), seg.page);
      return range{ptr, 0};
    }
    seg.mapped[i] = true;
  }
  for (std::size_t i = begin; i < end; ++i) counter.on_reserve(seg.page);  // a page is one physical allocation
  return range{seg.base + begin * seg.page, (end - begin) * seg.page};
}

// Unmaps the whole pages inside [ptr, ptr + size).
range caching_resource::impl::unmap_pages(expandable_segment& seg, std::uintptr_t ptr, std::size_t size) noexcept {
  const std::size_t begin = (ptr - seg.base + seg.page - 1) / seg.page;
  const std::size_t end = (ptr + size - seg.base) / seg.page;
  if (begin >= end) return range{ptr, 0};
  for (std::size_t i = begin; i < end; ++i) {
    memory->unmap_run(reinterpret_cast<void*>(seg.base + i * seg.page), seg.page);
    seg.mapped[i] = false;
    counter.on_release(seg.page);
  }
  return range{seg.base + begin * seg.page, (end - begin) * seg.page};
}

bool caching_resource::impl::map_block(cblock* to_map, std::size_t size, params& p) {
  const range mapped = map_pages(*to_map->segment, to_map->ptr, size, p.failure);
  if (mapped.size == 0) return false;
  block_pool& pool = *to_map->pool;
  pool.unmapped.erase(to_map);
  to_map->mapped = true;
  if (mapped.size < to_map->size) {
    auto* rest = new cblock;
    rest->stream = to_map->stream;
    rest->size = to_map->size - mapped.size;
    rest->ptr = to_map->ptr + mapped.size;
    rest->pool = &pool;
    rest->order = to_map->order;
    rest->mapped = false;
    rest->segment = to_map->segment;
    rest->prev = to_map;
    rest->next = to_map->next;
    if (rest->next != nullptr) rest->next->prev = rest;
    to_map->next = rest;
    pool.unmapped.insert(rest);
    to_map->size = mapped.size;
  }
  try_merge_blocks(to_map, to_map->prev, pool);
  try_merge_blocks(to_map, to_map->next, pool);
  pool.insert_into_blocks(to_map);
  return true;
}

void caching_resource::impl::unmap_block(cblock* b) {
  const range unmapped = unmap_pages(*b->segment, b->ptr, b->size);
  if (unmapped.size == 0) return;
  block_pool& pool = *b->pool;
  pool.blocks.erase(b);
  auto piece = [&](std::uintptr_t ptr, std::size_t size) {
    auto* f = new cblock;
    f->stream = b->stream;
    f->size = size;
    f->ptr = ptr;
    f->pool = &pool;
    f->order = b->order;
    f->segment = b->segment;
    return f;
  };
  const std::size_t before = unmapped.ptr - b->ptr;
  if (before > 0) {  // prev -> before -> b
    cblock* f = piece(b->ptr, before);
    f->prev = b->prev;
    if (f->prev != nullptr) f->prev->next = f;
    f->next = b;
    b->prev = f;
    pool.insert_into_blocks(f);
  }
  const std::size_t after = b->size - (before + unmapped.size);
  if (after > 0) {  // b -> after -> next
    cblock* f = piece(unmapped.ptr + unmapped.size, after);
    f->next = b->next;
    if (f->next != nullptr) f->next->prev = f;
    f->prev = b;
    b->next = f;
    pool.insert_into_blocks(f);
  }
  b->ptr = unmapped.ptr;
  b->size = unmapped.size;
  b->mapped = false;
  try_merge_blocks(b, b->prev, pool);
  try_merge_blocks(b, b->next, pool);
  pool.unmapped.insert(b);
}

// A whole range unmapped: gives its addresses back.
void caching_resource::impl::release_expandable_segment(cblock* b) {
  expandable_segment* seg = b->segment;
  b->pool->unmapped.erase(b);
  delete b;
  memory->release_range(reinterpret_cast<void*>(seg->base), seg->size);
  expandables.erase(std::find_if(expandables.begin(), expandables.end(), [seg](const auto& s) { return s.get() == seg; }));
}

}  // namespace gpumem
