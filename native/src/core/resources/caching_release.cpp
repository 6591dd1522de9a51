// caching_resource: giving memory back (cached blocks released to the upstream or unmapped, the
// garbage collection threshold, a stream going away, everything at the end). See caching_impl.hpp.
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

// Frees a cached block that is a whole segment.
void caching_resource::impl::release_block(cblock* b) {
  upstream->deallocate(reinterpret_cast<void*>(b->ptr), b->size, b->stream);
  segments.erase(b->ptr);
  counter.on_release(b->size);
  b->pool->blocks.erase(b);
  delete b;
}

// max_split_size set: frees the smallest oversize cached segment that covers the request, else the
// oversize ones from the largest down until they add up to it.
bool caching_resource::impl::release_available_cached_blocks(const params& p) {
  if (max_split == std::numeric_limits<std::size_t>::max()) return false;
  block_pool& pool = *p.pool;
  cblock key = key_of(p.stream, std::max(p.size, max_split));
  auto it = pool.blocks.lower_bound(&key);
  if (it == pool.blocks.end() || (*it)->stream != p.stream || (*it)->segment != nullptr) {
    if (it == pool.blocks.begin()) return false;
    std::size_t released = 0;
    --it;
    while (released < key.size && (*it)->size >= max_split && (*it)->stream == p.stream) {
      auto cur = it;
      const bool is_first = cur == pool.blocks.begin();
      if (!is_first) --it;
      if ((*cur)->segment == nullptr && !(*cur)->is_split()) {
        released += (*cur)->size;
        release_block(*cur);
      }
      if (is_first) break;
    }
    return released >= key.size;
  }
  if ((*it)->is_split()) return false;  // a piece of a segment cannot be given back alone
  release_block(*it);
  return true;
}

// Frees every cached segment that is not split, and unmaps the whole pages of cached expandable
// blocks. Always true, as in PyTorch (the caller retries).
bool caching_resource::impl::release_cached_blocks() {
  release_blocks(large_blocks);
  release_blocks(small_blocks);
  return true;
}

void caching_resource::impl::release_blocks(block_pool& pool) {
  std::vector<cblock*> to_unmap;
  for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
    cblock* b = *it++;
    if (b->segment != nullptr) {
      to_unmap.push_back(b);
    } else if (!b->is_split()) {
      release_block(b);
    }
  }
  for (cblock* b : to_unmap) {
    unmap_block(b);
    if (!b->is_split() && !b->mapped) release_expandable_segment(b);
  }
}

void caching_resource::impl::garbage_collect_cached_blocks() {
  const auto threshold =
      static_cast<std::size_t>(options.garbage_collection_threshold * static_cast<double>(options.allowed_memory_bytes));
  if (total_reserved() <= threshold) return;
  const std::size_t target = total_reserved() - threshold;
  std::size_t reclaimed = 0;
  std::uint64_t total_age = 0;
  std::size_t freeable = 0;
  auto age = [this](const cblock* b) { return large_blocks.get_free_blocks_call_count - b->gc_count_base; };
  for (const cblock* b : large_blocks.blocks) {
    if (!b->is_split()) {
      total_age += age(b);
      ++freeable;
    }
  }
  if (freeable == 0) return;
  bool freed = true;
  while (reclaimed < target && freed && freeable > 0) {
    const double age_threshold = static_cast<double>(total_age) / static_cast<double>(freeable);
    freed = false;
    for (auto it = large_blocks.blocks.begin(); it != large_blocks.blocks.end();) {
      cblock* b = *it++;
      if (!b->is_split() && b->segment == nullptr && static_cast<double>(age(b)) >= age_threshold) {
        freed = true;
        reclaimed += b->size;
        total_age -= age(b);
        --freeable;
        release_block(b);
      }
    }
  }
}

// `gone` is synchronised: its blocks (free, unmapped, live), segments and ranges are re-keyed to
// the default stream, so that a new stream given the same handle does not inherit them.
void caching_resource::impl::on_stream_destroyed(stream_handle gone) noexcept {
  std::lock_guard<std::mutex> guard(lock);
  if (gone == nullptr) return;
  try {
    for (block_pool* pool : {&small_blocks, &large_blocks}) {
      rekey(pool->blocks, gone);
      rekey(pool->unmapped, gone);
    }
    for (auto& [ptr, b] : live) {
      if (b->stream == gone) b->stream = nullptr;
      for (cblock* n = b->prev; n != nullptr && n->stream == gone; n = n->prev) n->stream = nullptr;
      for (cblock* n = b->next; n != nullptr && n->stream == gone; n = n->next) n->stream = nullptr;
    }
    for (auto& seg : expandables) {
      if (seg->stream == gone) seg->stream = nullptr;
    }
  } catch (...) {
  }
}

// The destructor's release: every segment and range, live blocks or not.
void caching_resource::impl::release_everything() noexcept {
  std::vector<cblock*> all;
  for (block_pool* pool : {&small_blocks, &large_blocks}) {
    for (cblock* b : pool->blocks) all.push_back(b);
    for (cblock* b : pool->unmapped) all.push_back(b);
  }
  for (auto& [ptr, b] : live) all.push_back(b);
  if (upstream != nullptr) {
    for (const auto& [base, size] : segments) {
      try {
        upstream->deallocate(reinterpret_cast<void*>(base), size, nullptr);
      } catch (...) {
      }
    }
  } else if (!expandables.empty()) {
    memory->synchronize();
    for (auto& seg : expandables) {
      for (std::size_t i = 0; i < seg->mapped.size(); ++i) {
        if (seg->mapped[i]) memory->unmap_run(reinterpret_cast<void*>(seg->base + i * seg->page), seg->page);
      }
      memory->release_range(reinterpret_cast<void*>(seg->base), seg->size);
    }
  }
  for (cblock* b : all) delete b;
}

}  // namespace gpumem
