#include "gpumem/caching_resource.hpp"

#include "gpumem/address_only.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpumem/cuda_resource.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/stats.hpp"
#include "gpumem/strategy_options.hpp"
#include "gpumem/strategy_registry.hpp"
#include "vmm_runs.hpp"

namespace gpumem {

namespace {

constexpr std::size_t kib = 1024;
constexpr std::size_t mib = 1024 * kib;
constexpr std::size_t roundup_intervals = 16;  // kRoundUpPowerOfTwoIntervals: 1 MiB to 64 GiB
constexpr std::size_t default_host_address_space = std::size_t{64} << 30;

bool power_of_two(std::size_t v) noexcept { return v != 0 && (v & (v - 1)) == 0; }
unsigned log2_floor(std::size_t v) noexcept { return 63u - static_cast<unsigned>(__builtin_clzll(v)); }

[[noreturn]] void bad_divisions(const std::string& text, const std::string& why) {
  throw invalid_argument(invalid_argument::kind::range, "roundupPower2Divisions",
                         "Expected roundupPower2Divisions as a count (4) or counts per interval in MiB "
                         "([256:1,512:2,>:8]) but received '" + text + "': " + why);
}

// A non-negative decimal integer, or nothing.
bool parse_count(const std::string& s, std::size_t& out) {
  if (s.empty() || s.size() > 18) return false;
  std::size_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::size_t>(c - '0');
  }
  out = v;
  return true;
}

// roundup_power2_next_division: `size` rounded up to the next of `divisions` equal steps between
// the powers of two around it.
std::size_t roundup_power2_next_division(std::size_t size, std::size_t divisions) {
  if (power_of_two(size)) return size;
  const std::size_t power2_floor = std::size_t{1} << log2_floor(size);
  const std::size_t step = power2_floor >> log2_floor(divisions);
  if (step == 0) return power2_floor << 1;
  const std::size_t floor = size & ~(step - 1);
  return floor == size ? size : floor + step;
}

}  // namespace

std::vector<std::size_t> parse_roundup_power2_divisions(const std::string& text) {
  std::vector<std::size_t> divisions(roundup_intervals, 0);
  // PyTorch's lexer: ',', ':', '[' and ']' are tokens of their own, spaces are dropped.
  std::vector<std::string> tokens;
  std::string word;
  for (char c : text) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!word.empty()) tokens.push_back(std::move(word)), word.clear();
      tokens.emplace_back(1, c);
    } else if (c != ' ') {
      word.push_back(c);
    }
  }
  if (!word.empty()) tokens.push_back(word);
  if (tokens.empty()) return divisions;
  if (tokens[0] != "[") {
    std::size_t value = 0;
    if (tokens.size() != 1 || !parse_count(tokens[0], value)) bad_divisions(text, "not a count");
    if (!power_of_two(value)) bad_divisions(text, "the count has to be a power of two");
    std::fill(divisions.begin(), divisions.end(), value);
    return divisions;
  }
  // The per-interval form, with PyTorch's own reading: the first interval given also sets every
  // interval below it, and '>' sets every interval from the last one given (that one included).
  bool first = true;
  std::size_t last_index = 0;
  std::size_t i = 1;
  auto token = [&](std::size_t at) -> const std::string& {
    if (at >= tokens.size()) bad_divisions(text, "it ends early");
    return tokens[at];
  };
  while (token(i) != "]") {
    const std::string& interval = token(i);
    if (token(i + 1) != ":") bad_divisions(text, "expected ':' after '" + interval + "'");
    std::size_t value = 0;
    if (!parse_count(token(i + 2), value)) bad_divisions(text, "'" + token(i + 2) + "' is not a count");
    if (value != 0 && !power_of_two(value)) bad_divisions(text, "each count has to be a power of two or 0");
    if (interval == ">") {
      std::fill(divisions.begin() + static_cast<std::ptrdiff_t>(last_index), divisions.end(), value);
    } else {
      std::size_t mebibytes = 0;
      if (!parse_count(interval, mebibytes) || !power_of_two(mebibytes)) {
        bad_divisions(text, "each interval has to be a power of two (MiB) or '>'");
      }
      const std::size_t index = std::min<std::size_t>(log2_floor(mebibytes), roundup_intervals - 1);
      if (first) {
        std::fill(divisions.begin(), divisions.begin() + static_cast<std::ptrdiff_t>(index), value);
        first = false;
      }
      divisions[index] = value;
      last_index = index;
    }
    i += 3;
    if (token(i) == ",") ++i;
    else if (token(i) != "]") bad_divisions(text, "expected ',' or ']'");
  }
  if (i + 1 != tokens.size()) bad_divisions(text, "text after ']'");
  return divisions;
}

std::size_t caching_round_size(std::size_t bytes, const std::vector<std::size_t>& divisions) {
  constexpr std::size_t block = caching_resource::min_block_bytes;
  if (bytes < block) return block;
  std::size_t n = 0;
  if (!divisions.empty()) {
    const int index = std::clamp(static_cast<int>(log2_floor(bytes)) - 20, 0, static_cast<int>(divisions.size()) - 1);
    n = divisions[static_cast<std::size_t>(index)];
  }
  if (n > 1 && bytes > block * n) return roundup_power2_next_division(bytes, n);
  return block * ((bytes + block - 1) / block);
}

std::size_t caching_allocation_size(std::size_t rounded) {
  if (rounded <= caching_resource::small_size) return caching_resource::small_buffer;
  if (rounded < caching_resource::min_large_alloc) return caching_resource::large_buffer;
  constexpr std::size_t r = caching_resource::round_large;
  return r * ((rounded + r - 1) / r);
}

namespace {

struct block_pool;
struct expandable_segment;

// PyTorch's Block: a piece of a segment (or of an expandable segment's range, mapped or not).
struct cblock {
  stream_handle stream = nullptr;
  std::size_t size = 0;
  std::uintptr_t ptr = 0;
  block_pool* pool = nullptr;
  std::uint64_t order = 0;  // the segment's creation order: equal sizes are told apart by it, then ptr
  bool allocated = false;
  bool mapped = true;
  std::size_t requested = 0;
  std::uint64_t gc_count_base = 0;
  cblock* prev = nullptr;
  cblock* next = nullptr;
  expandable_segment* segment = nullptr;  // expandable mode: the range it lies in
  std::vector<stream_handle> stream_uses;  // record_stream's streams while allocated

  bool is_split() const noexcept { return prev != nullptr || next != nullptr; }
};

// BlockComparatorSize: stream, then size, then address (the segment's order, then the pointer).
struct by_size {
  bool operator()(const cblock* a, const cblock* b) const noexcept {
    if (a->stream != b->stream) return std::less<stream_handle>()(a->stream, b->stream);
    if (a->size != b->size) return a->size < b->size;
    if (a->order != b->order) return a->order < b->order;
    return a->ptr < b->ptr;
  }
};

// BlockComparatorAddress: stream, then address.
struct by_address {
  bool operator()(const cblock* a, const cblock* b) const noexcept {
    if (a->stream != b->stream) return std::less<stream_handle>()(a->stream, b->stream);
    if (a->order != b->order) return a->order < b->order;
    return a->ptr < b->ptr;
  }
};

struct block_pool {
  explicit block_pool(bool is_small) : small(is_small) {}
  std::set<cblock*, by_size> blocks;         // free, mapped
  std::set<cblock*, by_address> unmapped;    // expandable segments' unmapped ranges
  const bool small;
  std::uint64_t get_free_blocks_call_count = 0;

  void insert_into_blocks(cblock* b) {
    b->gc_count_base = get_free_blocks_call_count;
    blocks.insert(b);
  }
};

// ExpandableSegment: a virtual range whose pages (2 MiB small, 20 MiB large) are mapped one
// physical allocation each.
struct expandable_segment {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  std::size_t page = 0;
  stream_handle stream = nullptr;
  std::uint64_t order = 0;
  std::vector<bool> mapped;  // per page
};

struct range {
  std::uintptr_t ptr = 0;
  std::size_t size = 0;
};

// The search key of a request (lower_bound over blocks ordered by stream, size, address).
cblock key_of(stream_handle stream, std::size_t size) {
  cblock key;
  key.stream = stream;
  key.size = size;
  return key;
}

}  // namespace

struct caching_resource::impl final : stream_observer {
  impl(memory_resource* up, std::unique_ptr<vmm> mem, const caching_options& opts,
       std::unique_ptr<stream_ordering> order)
      : upstream(up), memory(mem ? std::make_unique<detail::vmm_runs>(std::move(mem)) : nullptr), options(opts), ordering(std::move(order)) {
    divisions = parse_roundup_power2_divisions(options.roundup_power2_divisions);
    max_split = options.max_split_size_bytes == 0 ? std::numeric_limits<std::size_t>::max() : options.max_split_size_bytes;
  }

  ~impl() { release_everything(); }

  // ----- malloc ---------------------------------------------------------------------------------

  struct params {
    stream_handle stream;
    block_pool* pool;
    std::size_t size;        // rounded
    std::size_t alloc_size;  // a new segment's
    cblock* block = nullptr;
    std::string failure;
  };

  void* allocate(std::size_t orig_size, stream_handle stream) {
    if (orig_size > std::numeric_limits<std::size_t>::max() / 2) {
      throw_oom(orig_size, "the request exceeds any segment size");
    }
    live.reserve(live.size() + 1);
    const std::size_t size = caching_round_size(orig_size, divisions);
    params p{stream, size <= small_size ? &small_blocks : &large_blocks, size, caching_allocation_size(size), nullptr, {}};
    bool found = get_free_block(p);
    if (!found) {
      if (options.allowed_memory_bytes > 0 && options.garbage_collection_threshold > 0) garbage_collect_cached_blocks();
      found = alloc_block(p) || (release_available_cached_blocks(p) && alloc_block(p)) ||
              (release_cached_blocks() && alloc_block(p));
    }
    if (!found) throw_oom(orig_size, p.failure.empty() ? "no segment could be had" : p.failure);
    cblock* b = alloc_found_block(p, orig_size);
    live.emplace(b->ptr, b);
    counter.on_allocate(orig_size);
    return reinterpret_cast<void*>(b->ptr);
  }

  bool get_free_block(params& p) {
    block_pool& pool = *p.pool;
    if (options.allowed_memory_bytes > 0 && options.garbage_collection_threshold > 0) ++pool.get_free_blocks_call_count;
    cblock key = key_of(p.stream, p.size);
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != p.stream) return false;
    if ((*it)->segment != nullptr) {
      // Best fit counts the unmapped room right after a block as its own: it can grow into it.
      auto expandable_size = [](const cblock* b) { return b->size + (b->next != nullptr && !b->next->mapped ? b->next->size : 0); };
      auto next = std::next(it);
      while ((*it)->segment != nullptr && next != pool.blocks.end() && (*next)->stream == p.stream &&
             expandable_size(*next) < expandable_size(*it)) {
        it = next++;
      }
    }
    // An oversize block is not given to a small request, nor to a large one it exceeds by much.
    if (p.size < max_split && (*it)->size >= max_split) return false;
    if (p.size >= max_split && (*it)->size >= p.size + options.max_non_split_rounding_bytes) return false;
    p.block = *it;
    pool.blocks.erase(it);
    return true;
  }

  bool alloc_block(params& p) {
    const std::size_t cap = options.allowed_memory_bytes;
    if (cap > 0 && (p.alloc_size > cap || total_reserved() > cap - p.alloc_size)) {
      p.failure = "a segment of " + format_bytes(p.alloc_size) + " would pass the allowed " + format_bytes(cap);
      return false;
    }
    if (memory) return try_allocate_expandable_block(p);
    void* ptr = nullptr;
    try {
      ptr = upstream->allocate(p.alloc_size, p.stream);
    } catch (const out_of_memory& e) {
      p.failure = std::string("upstream: ") + e.reason();
      return false;
    }
    auto* b = new cblock;
    b->stream = p.stream;
    b->size = p.alloc_size;
    b->ptr = reinterpret_cast<std::uintptr_t>(ptr);
    b->pool = p.pool;
    b->order = next_order++;
    segments.emplace(b->ptr, b->size);
    counter.on_reserve(p.alloc_size);
    p.block = b;
    return true;
  }

  bool should_split(const cblock* b, std::size_t size) const noexcept {
    const std::size_t remaining = b->size - size;
    if (b->pool->small || options.expandable_segments) return remaining >= min_block_bytes;
    return size < max_split && remaining > small_size;
  }

  cblock* alloc_found_block(params& p, std::size_t orig_size) {
    cblock* b = p.block;
    if (should_split(b, p.size)) {
      cblock* remaining = b;
      b = new cblock;
      b->stream = p.stream;
      b->size = p.size;
      b->ptr = remaining->ptr;
      b->pool = remaining->pool;
      b->order = remaining->order;
      b->segment = remaining->segment;
      b->prev = remaining->prev;
      if (b->prev != nullptr) b->prev->next = b;
      b->next = remaining;
      remaining->prev = b;
      remaining->ptr += p.size;
      remaining->size -= p.size;
      remaining->pool->insert_into_blocks(remaining);
    }
    b->allocated = true;
    b->requested = orig_size;
    return b;
  }

  // ----- free -----------------------------------------------------------------------------------

  void deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
    auto it = live.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == live.end()) throw_unknown_pointer(ptr);
    cblock* b = it->second;
    if (b->requested != bytes) throw_size_mismatch(ptr, bytes, b->requested);
    // PyTorch keeps a block on the stream it was allocated on. Work the program queued on the freeing
    // stream, or on streams record_stream named, may still use it: the block's stream waits for
    // them, so that its next user there comes after (PyTorch polls events for the same promise).
    if (stream != b->stream) order_after(b->stream, stream);
    for (stream_handle s : b->stream_uses) {
      if (s != b->stream && s != stream) order_after(b->stream, s);
    }
    live.erase(it);
    counter.on_deallocate(bytes);
    b->stream_uses.clear();
    free_block(b);
  }

  void order_after(stream_handle waiter, stream_handle source) {
    event_handle event = ordering->record(source);
    try {
      ordering->wait(waiter, event);
    } catch (...) {
      ordering->release(event);
      throw;
    }
    ordering->release(event);
  }

  void free_block(cblock* b) {
    b->allocated = false;
    b->requested = 0;
    block_pool& pool = *b->pool;
    try_merge_blocks(b, b->prev, pool);
    try_merge_blocks(b, b->next, pool);
    pool.insert_into_blocks(b);
  }

  std::size_t try_merge_blocks(cblock* dst, cblock* src, block_pool& pool) {
    if (src == nullptr || src->allocated || dst->mapped != src->mapped) return 0;
    if (dst->prev == src) {
      dst->ptr = src->ptr;
      dst->prev = src->prev;
      if (dst->prev != nullptr) dst->prev->next = dst;
    } else {
      dst->next = src->next;
      if (dst->next != nullptr) dst->next->prev = dst;
    }
    const std::size_t subsumed = src->size;
    dst->size += subsumed;
    if (src->mapped) {
      pool.blocks.erase(src);
    } else {
      pool.unmapped.erase(src);
    }
    delete src;
    return subsumed;
  }

  // ----- giving memory back ---------------------------------------------------------------------

  // Frees a cached block that is a whole segment.
  void release_block(cblock* b) {
    upstream->deallocate(reinterpret_cast<void*>(b->ptr), b->size, b->stream);
    segments.erase(b->ptr);
    counter.on_release(b->size);
    b->pool->blocks.erase(b);
    delete b;
  }

  // max_split_size set: frees the smallest oversize cached segment that covers the request, else the
  // oversize ones from the largest down until they add up to it.
  bool release_available_cached_blocks(const params& p) {
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
  bool release_cached_blocks() {
    release_blocks(large_blocks);
    release_blocks(small_blocks);
    return true;
  }

  void release_blocks(block_pool& pool) {
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

  void garbage_collect_cached_blocks() {
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

  // ----- expandable segments --------------------------------------------------------------------

  bool try_allocate_expandable_block(params& p) {
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

  static bool allocatable(const cblock* b) noexcept { return b != nullptr && !b->allocated; }

  // A free/unmapped run of the request's stream and pool with room for it, or a new segment's range.
  cblock* find_expandable_block(params& p) {
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
  range map_pages(expandable_segment& seg, std::uintptr_t ptr, std::size_t size, std::string& failure) {
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
  range unmap_pages(expandable_segment& seg, std::uintptr_t ptr, std::size_t size) noexcept {
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

  bool map_block(cblock* to_map, std::size_t size, params& p) {
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

  void unmap_block(cblock* b) {
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
  void release_expandable_segment(cblock* b) {
    expandable_segment* seg = b->segment;
    b->pool->unmapped.erase(b);
    delete b;
    memory->release_range(reinterpret_cast<void*>(seg->base), seg->size);
    expandables.erase(std::find_if(expandables.begin(), expandables.end(), [seg](const auto& s) { return s.get() == seg; }));
  }

  // ----- streams going away ---------------------------------------------------------------------

  // `gone` is synchronised: its blocks (free, unmapped, live), segments and ranges are re-keyed to
  // the default stream, so that a new stream given the same handle does not inherit them.
  void on_stream_destroyed(stream_handle gone) noexcept override {
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

  template <class Set>
  static void rekey(Set& set, stream_handle gone) {
    std::vector<cblock*> moved;
    for (auto it = set.begin(); it != set.end();) {
      if ((*it)->stream == gone) {
        moved.push_back(*it);
        it = set.erase(it);
      } else {
        ++it;
      }
    }
    for (cblock* b : moved) {
      b->stream = nullptr;
      set.insert(b);
    }
  }

  // ----- the rest -------------------------------------------------------------------------------

  std::size_t total_reserved() const noexcept { return static_cast<std::size_t>(counter.get().reserved_bytes); }

  [[noreturn]] void throw_oom(std::size_t bytes, const std::string& reason) {
    counter.on_oom();
    throw out_of_memory("caching_resource: out of memory allocating " + format_bytes(bytes) + " (" + reason + ")", bytes,
                        snapshot());
  }

  resource_stats snapshot() const noexcept {
    resource_stats s = counter.get();
    std::size_t largest = 0;
    for (const block_pool* pool : {&small_blocks, &large_blocks}) {
      for (const cblock* b : pool->blocks) largest = std::max(largest, b->size);
    }
    s.largest_free_block = static_cast<std::int64_t>(largest);
    return s;
  }

  // The destructor's release: every segment and range, live blocks or not.
  void release_everything() noexcept {
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

  memory_resource* const upstream;              // cudaMalloc or host memory (not expandable)
  const std::unique_ptr<detail::vmm_runs> memory;  // expandable segments
  const caching_options options;
  const std::unique_ptr<stream_ordering> ordering;
  std::vector<std::size_t> divisions;
  std::size_t max_split = 0;

  std::mutex lock;
  stats_counter counter;
  block_pool small_blocks{true};
  block_pool large_blocks{false};
  std::unordered_map<std::uintptr_t, cblock*> live;
  std::unordered_map<std::uintptr_t, std::size_t> segments;  // cudaMalloc'd: base -> size
  std::vector<std::unique_ptr<expandable_segment>> expandables;
  std::uint64_t next_order = 0;
};

namespace {

void check_options(const caching_options& o, bool expandable) {
  auto fail = [](const char* field, const std::string& what) {
    throw invalid_argument(invalid_argument::kind::range, field, what);
  };
  if (o.max_split_size_bytes != 0 && o.max_split_size_bytes < caching_resource::large_buffer) {
    fail("maxSplitSizeBytes", "Expected maxSplitSizeBytes of at least 20 MiB (PyTorch's max_split_size_mb >= 20) but received " +
                                  std::to_string(o.max_split_size_bytes));
  }
  if (o.max_non_split_rounding_bytes < caching_resource::large_buffer) {
    fail("maxNonSplitRoundingBytes", "Expected maxNonSplitRoundingBytes of at least 20 MiB but received " +
                                         std::to_string(o.max_non_split_rounding_bytes));
  }
  const double gc = o.garbage_collection_threshold;
  if (!(gc == 0 || (gc > 0 && gc < 1))) {
    fail("garbageCollectionThreshold",
         "Expected garbageCollectionThreshold in (0, 1), or 0 for none, but received " + std::to_string(gc));
  }
  if (o.expandable_segments != expandable) {
    throw invalid_argument(invalid_argument::kind::type, "expandableSegments",
                           expandable ? "Expected expandableSegments true for a caching_resource over physical memory"
                                      : "Expected expandableSegments false for a caching_resource over an upstream resource");
  }
  parse_roundup_power2_divisions(o.roundup_power2_divisions);
}

}  // namespace

caching_resource::caching_resource(memory_resource& upstream, caching_options options, std::unique_ptr<stream_ordering> ordering) {
  check_options(options, false);
  if (!ordering) ordering = make_ordering(upstream.kind(), upstream.device());
  impl_ = std::make_unique<impl>(&upstream, nullptr, options, std::move(ordering));
  add_stream_observer(*impl_);
}

caching_resource::caching_resource(std::unique_ptr<vmm> memory, caching_options options,
                                   std::unique_ptr<stream_ordering> ordering) {
  if (!memory) throw invalid_argument(invalid_argument::kind::type, "memory", "Expected a vmm but received none");
  check_options(options, true);
  if (small_buffer % memory->granule_bytes() != 0) {
    throw invalid_argument(invalid_argument::kind::range, "granuleBytes",
                           "Expected a granule that divides 2 MiB but received " + std::to_string(memory->granule_bytes()));
  }
  if (!ordering) ordering = make_ordering(memory->kind(), memory->device());
  impl_ = std::make_unique<impl>(nullptr, std::move(memory), options, std::move(ordering));
  add_stream_observer(*impl_);
}

caching_resource::~caching_resource() { remove_stream_observer(*impl_); }

const caching_options& caching_resource::options() const noexcept { return impl_->options; }

void* caching_resource::do_allocate(std::size_t bytes, stream_handle stream) {
  std::lock_guard<std::mutex> guard(impl_->lock);
  return impl_->allocate(bytes, stream);
}

void caching_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
  std::lock_guard<std::mutex> guard(impl_->lock);
  impl_->deallocate(ptr, bytes, stream);
}

void caching_resource::do_record_stream(void* ptr, stream_handle stream) {
  std::lock_guard<std::mutex> guard(impl_->lock);
  auto it = impl_->live.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == impl_->live.end()) throw_unknown_pointer(ptr);
  std::vector<stream_handle>& uses = it->second->stream_uses;
  if (stream != it->second->stream && std::find(uses.begin(), uses.end(), stream) == uses.end()) uses.push_back(stream);
}

resource_stats caching_resource::do_stats() const {
  std::lock_guard<std::mutex> guard(impl_->lock);
  return impl_->snapshot();
}

void caching_resource::do_reset_peak() {
  std::lock_guard<std::mutex> guard(impl_->lock);
  impl_->counter.reset_peak();
}

// emptyCache: PyTorch's empty_cache releases every cached segment; bytes_to_keep is not one of its
// notions, so any trim releases them all.
void caching_resource::do_trim(std::size_t) {
  std::lock_guard<std::mutex> guard(impl_->lock);
  impl_->release_cached_blocks();
}

std::size_t caching_resource::do_allocation_size(const void* ptr) const {
  std::lock_guard<std::mutex> guard(impl_->lock);
  auto it = impl_->live.find(reinterpret_cast<std::uintptr_t>(ptr));
  return it == impl_->live.end() ? 0 : it->second->requested;
}

memory_kind caching_resource::do_kind() const noexcept {
  return impl_->upstream != nullptr ? impl_->upstream->kind() : impl_->memory->kind();
}

int caching_resource::do_device() const noexcept {
  return impl_->upstream != nullptr ? impl_->upstream->device() : impl_->memory->device();
}

namespace {

const caching_spec& own(const chain_spec& spec) { return spec.options<caching_spec>(); }

}  // namespace

// 'caching': PyTorch's CUDACachingAllocator rules over cudaMalloc (or host memory), or over
// physical memory mapped in pages with expandableSegments.
const strategy_descriptor& caching_strategy() {
  static const strategy_descriptor descriptor = [] {
    strategy_descriptor d;
    d.name = "caching";
    d.description =
        "PyTorch's CUDACachingAllocator rules (rounding, small/large pools, best fit per stream, splitting, "
        "max_split_size, garbage collection, free-and-retry, expandable segments), for replay and as an allocator over "
        "cudaMalloc or host memory";
    d.options_type = &typeid(caching_spec);
    d.layer = strategy_layer::cache;
    d.wraps = "cudaMalloc (upstream 'cuda') or host memory (upstream 'host'); with expandableSegments, CUDA VMM or "
              "host mappings";
    d.flags.capturable = false;  // new segments and expandable pages take driver calls at any time
    d.options = {
        choice_option<&caching_spec::upstream>("upstream", "where the segments come from",
                                               {{"cuda", caching_upstream::cuda}, {"host", caching_upstream::host}})
            .placement().js_only().label("caching.upstream"),
        text_option<&caching_spec::options, &caching_options::roundup_power2_divisions>(
            "roundupPower2Divisions", "PyTorch's roundup_power2_divisions: a count (4) or counts per interval in MiB ([256:1,512:2,>:8])")
            .env("GPUMEM_CACHING_ROUNDUP_POWER2_DIVISIONS", "caching.roundup_power2_divisions").unset_text("none"),
        bytes_option<&caching_spec::options, &caching_options::max_split_size_bytes>(
            "maxSplitSizeBytes", "PyTorch's max_split_size_mb in bytes: blocks this large are not split (at least 20 MiB)")
            .positive().unset_at(0)
            .env("GPUMEM_CACHING_MAX_SPLIT_SIZE", "caching.max_split_size").zero_means("unset").unset_text("none"),
        bytes_option<&caching_spec::options, &caching_options::max_non_split_rounding_bytes>(
            "maxNonSplitRoundingBytes", "PyTorch's max_non_split_rounding_mb in bytes: how much larger an oversize cached block may be than a request it serves")
            .positive().js_only(),
        number_option<&caching_spec::options, &caching_options::garbage_collection_threshold>(
            "garbageCollectionThreshold", "PyTorch's garbage_collection_threshold in (0, 1): acts where allowedMemoryBytes is set (0: off)")
            .env("GPUMEM_CACHING_GC_THRESHOLD", "caching.garbage_collection_threshold"),
        bytes_option<&caching_spec::options, &caching_options::allowed_memory_bytes>(
            "allowedMemoryBytes", "set_per_process_memory_fraction in bytes: no segment past it, and the base of garbage collection")
            .positive().unset_at(0)
            .env("GPUMEM_CACHING_ALLOWED_MEMORY", "caching.allowed_memory").zero_means("no cap").unset_text("none"),
        boolean_option<&caching_spec::options, &caching_options::expandable_segments>(
            "expandableSegments", "PyTorch's expandable_segments:True: one range per stream and pool, mapped in 2 MiB / 20 MiB pages")
            .env("GPUMEM_CACHING_EXPANDABLE_SEGMENTS", "caching.expandable_segments"),
        bytes_option<&caching_spec::options, &caching_options::expandable_address_space_bytes>(
            "expandableAddressSpaceBytes", "the virtual range of each expandable segment (unset: 9/8 of the device's memory, 64 GiB on the host)")
            .positive().unset_at(0).js_only(),
    };
    d.leaf_name = [](const chain_spec& spec) -> const char* {
      const bool host = own(spec).upstream == caching_upstream::host;
      if (own(spec).options.expandable_segments) return host ? "mmap" : "vmm";
      return host ? "host" : "cuda";
    };
    d.make_leaf = [](const chain_spec& spec, chain_build& build) -> std::unique_ptr<memory_resource> {
      const bool host = own(spec).upstream == caching_upstream::host;
      if (own(spec).options.expandable_segments) {
        build.physical = host ? make_host_vmm(caching_resource::small_buffer)
                              : make_device_vmm(spec.device, {"expandable", "upstream 'host'", caching_resource::small_buffer,
                                                              spec.peer_access, false});
        return nullptr;
      }
      if (host) return std::make_unique<host_resource>();
      return std::make_unique<cuda_resource>(spec.device, spec.peer_access);
    };
    // segments and pages are taken and given back, never read or written: address-only memory will do
    // (the doctor's replays), with PyTorch's 2 MiB page and the limit as the device's memory
    d.flags.address_only = true;
    d.make_address_only_leaf = [](const chain_spec& spec, chain_build& build) -> std::unique_ptr<memory_resource> {
      if (own(spec).options.expandable_segments) {
        build.physical = make_address_only_vmm(caching_resource::small_buffer, spec.limit_bytes.value_or(0));
        return nullptr;
      }
      return make_address_only_resource();
    };
    d.layer_name = [](const chain_spec&) -> const char* { return "caching"; };
    d.make_layer = [](const chain_spec& spec, chain_build& build) -> std::unique_ptr<memory_resource> {
      if (own(spec).options.expandable_segments) {
        return std::make_unique<caching_resource>(std::move(build.physical), own(spec).options);
      }
      return std::make_unique<caching_resource>(build.chain.top(), own(spec).options);
    };
    d.validate = [](const chain_spec& spec) { check_options(own(spec).options, own(spec).options.expandable_segments); };
    d.flags.peer_access = true;
    d.no_peer_access = [](const chain_spec& spec) {
      return std::string(own(spec).upstream == caching_upstream::host ? "'caching' over upstream 'host' holds host memory" : "");
    };
    return d;
  }();
  return descriptor;
}

}  // namespace gpumem
