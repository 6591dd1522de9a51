// Internals of pool_resource (a private header): the block and segment records, the segregated-fit
// index of free blocks, the table of live blocks, the record allocator and the lock.
//
// Every structure is intrusive or open-addressed, so that a steady-state allocate/deallocate pair
// allocates nothing on the heap and does work that does not grow with the number of blocks: the
// target is a few tens of nanoseconds per pair.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "gpumem/stream.hpp"
#include "gpumem/stream_ordering.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

// The hot path (best fit, split, merge, table lookups) is forced inline into allocate/deallocate
// and the rare paths (growing a table, new records) kept out of line, so that the steady-state
// pair stays a few small functions.
#if defined(__GNUC__) || defined(__clang__)
#define GPUMEM_POOL_INLINE inline __attribute__((always_inline))
#define GPUMEM_POOL_COLD __attribute__((noinline, cold))
#else
#define GPUMEM_POOL_INLINE inline
#define GPUMEM_POOL_COLD
#endif

namespace gpumem::detail::pool {

inline constexpr unsigned granule_shift = 9;  // block sizes and offsets are multiples of 512
inline constexpr std::size_t granule = std::size_t{1} << granule_shift;

inline std::size_t round_up(std::size_t bytes, std::size_t multiple) noexcept {
  return (bytes + multiple - 1) / multiple * multiple;
}

// A test-and-test-and-set lock. The pool's critical sections are tens of nanoseconds; uncontended,
// this measured 5-8 ns per allocate/deallocate pair cheaper than std::mutex (its unlock is a plain
// store, not an atomic read-modify-write; see tests/pool_microbench.cpp). After a short spin a
// waiter yields, so that it does not burn the time slice of a holder that was preempted (the thread
// test runs 4 threads on 2 cores).
class spin_lock {
 public:
  void lock() noexcept {
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    lock_contended();
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  static void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  GPUMEM_POOL_COLD void lock_contended() noexcept {
    // Exponential backoff: a waiter that looks at the lock less and less often leaves its cache
    // line with the holder, which then re-locks at the uncontended cost instead of fetching the
    // line back after every hand-over.
    unsigned pauses = 1;
    for (unsigned rounds = 0;; ++rounds) {
      if (rounds < 16) {
        for (unsigned i = 0; i < pauses; ++i) cpu_relax();
        pauses = pauses < 64 ? pauses * 2 : pauses;
      } else {
        std::this_thread::yield();
      }
      if (!locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }

  std::atomic<bool> locked_{false};
};

struct segment;
class free_index;

enum class block_state : std::uint8_t { free, live, pending };

// A piece of a segment. Blocks of a segment form an address-ordered doubly-linked chain (for
// coalescing); a free block is also linked into one size class of one free_index, and a pending
// block into the pool's pending list (list_prev/list_next serve both, and the record allocator).
struct block {
  std::uintptr_t addr = 0;
  std::size_t size = 0;       // bytes, a multiple of 512
  std::size_t requested = 0;  // while live: the bytes the caller asked for
  block* prev_in_segment = nullptr;
  block* next_in_segment = nullptr;
  block* list_prev = nullptr;
  block* list_next = nullptr;
  free_index* index = nullptr;  // while free: the index holding it
  segment* seg = nullptr;
  // Live: the allocation stream (a placeholder once that stream is destroyed); free/pending: the
  // stream it was freed on (the default stream once that stream is destroyed).
  stream_handle stream = nullptr;
  std::uint32_t size_class = 0;
  block_state state = block_state::free;
  bool quarantined = false;             // an event could not be recorded: never reused
  bool mixed = false;                   // free, and used_on lists other streams that freed pieces of it
  // Streams other than `stream` whose work on this memory a reuse must be ordered after. Live: the
  // streams record_stream named (events recorded on them at free). Free: the streams that freed
  // pieces merged into this block (waited on by the stream that takes it).
  std::vector<stream_handle> used_on;
  std::vector<event_handle> events;     // while pending: events not yet seen complete
};

// One allocation from the upstream.
struct segment {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  bool small = false;
  std::size_t used_blocks = 0;  // live + pending blocks; 0 means the segment can go back upstream
  // Creation order: equal free blocks of two segments are told apart by it, not by address (host
  // addresses depend on what the process's other threads allocated, so replays would differ).
  std::uint64_t order = 0;
  block* first = nullptr;
  segment* prev = nullptr;
  segment* next = nullptr;
};

// Free blocks of one stream and one size class family (small or large), TLSF-style: sizes in units
// of 512 bytes; unit counts below 32 each have an exact class, larger ones are split into classes by
// their highest bit and the 5 bits below it (32 linear classes per power of two, so sizes in a class
// differ by at most 1/32). Two bitmaps find the first non-empty class at or above a size in O(1);
// best_fit then scans that class for the exact best fit.
class free_index {
 public:
  static constexpr unsigned linear_bits = 5;
  static constexpr unsigned linear_classes = 1u << linear_bits;
  static constexpr unsigned max_log2 = 63 - granule_shift;  // highest bit a unit count can have
  static constexpr unsigned group_count = max_log2 - linear_bits + 2;
  static constexpr unsigned class_count = group_count * linear_classes;
  static_assert(group_count <= 64, "one bit per group in a 64-bit word");

  static GPUMEM_POOL_INLINE unsigned class_of(std::size_t size) noexcept {
    const std::uint64_t units = size >> granule_shift;
    if (units < linear_classes) return static_cast<unsigned>(units);
    const unsigned log2 = 63u - static_cast<unsigned>(__builtin_clzll(units));
    const unsigned sub = static_cast<unsigned>(units >> (log2 - linear_bits)) - linear_classes;
    return (log2 - linear_bits + 1) * linear_classes + sub;
  }

  bool empty() const noexcept { return group_bits_ == 0; }

  GPUMEM_POOL_INLINE void insert(block* b) noexcept {
    const unsigned c = class_of(b->size);
    b->size_class = c;
    b->index = this;
    b->list_prev = nullptr;
    b->list_next = heads_[c];
    if (heads_[c] != nullptr) heads_[c]->list_prev = b;
    heads_[c] = b;
    class_bits_[c / linear_classes] |= 1u << (c % linear_classes);
    group_bits_ |= std::uint64_t{1} << (c / linear_classes);
  }

  GPUMEM_POOL_INLINE void remove(block* b) noexcept {
    const unsigned c = b->size_class;
    if (b->list_prev != nullptr) {
      b->list_prev->list_next = b->list_next;
    } else {
      heads_[c] = b->list_next;
    }
    if (b->list_next != nullptr) b->list_next->list_prev = b->list_prev;
    b->list_prev = b->list_next = nullptr;
    b->index = nullptr;
    if (heads_[c] == nullptr) {
      const unsigned g = c / linear_classes;
      class_bits_[g] &= ~(1u << (c % linear_classes));
      if (class_bits_[g] == 0) group_bits_ &= ~(std::uint64_t{1} << g);
    }
  }

  // At most this many blocks of one class are compared per search. Classes hold a handful of
  // blocks in practice, and then the search is exact; the bound keeps a pathological pool (thousands
  // of free blocks of one size) from turning every allocation into a long walk: past it, the best
  // of the blocks looked at is taken, which still fits.
  static constexpr unsigned max_scan = 64;

  // The smallest free block of at least `size` bytes (the first among equals, see better); or nullptr.
  GPUMEM_POOL_INLINE block* best_fit(std::size_t size) const noexcept {
    const unsigned c = class_of(size);
    block* best = nullptr;
    if (heads_[c] != nullptr) {  // this class may also hold blocks smaller than `size`
      best = best_in_class(c, size, max_scan);
      if (best != nullptr) return best;
    }
    const unsigned next = first_nonempty_from(c + 1);
    if (next != class_count) return best_in_class(next, size, max_scan);
    // Nothing larger: before the pool grows, look past the bound for a block of this class that fits.
    return heads_[c] != nullptr ? best_in_class(c, size, ~0u) : nullptr;
  }

  std::size_t largest() const noexcept {
    if (group_bits_ == 0) return 0;
    const unsigned g = 63u - static_cast<unsigned>(__builtin_clzll(group_bits_));
    const unsigned c = g * linear_classes + 31u - static_cast<unsigned>(__builtin_clz(class_bits_[g]));
    std::size_t largest = 0;
    for (block* b = heads_[c]; b != nullptr; b = b->list_next) largest = b->size > largest ? b->size : largest;
    return largest;
  }

  // Smaller first; among equals the older segment, then the lower address within a segment.
  static bool better(const block* candidate, const block* best) noexcept {
    if (best == nullptr || candidate->size < best->size) return true;
    if (candidate->size != best->size) return false;
    return candidate->seg == best->seg ? candidate->addr < best->addr : candidate->seg->order < best->seg->order;
  }

 private:
  GPUMEM_POOL_INLINE block* best_in_class(unsigned c, std::size_t size, unsigned limit) const noexcept {
    block* best = nullptr;
    unsigned scanned = 0;
    for (block* b = heads_[c]; b != nullptr && scanned < limit; b = b->list_next, ++scanned) {
      if (b->size >= size && better(b, best)) best = b;
    }
    return best;
  }

  GPUMEM_POOL_INLINE unsigned first_nonempty_from(unsigned c) const noexcept {
    if (c >= class_count) return class_count;
    const unsigned g = c / linear_classes;
    const std::uint32_t in_group = class_bits_[g] & (~0u << (c % linear_classes));
    if (in_group != 0) return g * linear_classes + static_cast<unsigned>(__builtin_ctz(in_group));
    const std::uint64_t groups = g + 1 < 64 ? group_bits_ & (~std::uint64_t{0} << (g + 1)) : 0;
    if (groups == 0) return class_count;
    const unsigned g2 = static_cast<unsigned>(__builtin_ctzll(groups));
    return g2 * linear_classes + static_cast<unsigned>(__builtin_ctz(class_bits_[g2]));
  }

  std::uint64_t group_bits_ = 0;
  std::uint32_t class_bits_[group_count] = {};
  block* heads_[class_count] = {};
};

// Live blocks by address: open addressing with linear probing, backward-shift deletion (no
// tombstones, so probe lengths stay short under churn), power-of-two capacity, load <= 1/2.
class live_table {
 public:
  static constexpr std::size_t npos = ~std::size_t{0};

  live_table() { rehash(1024); }

  // Grows now if needed, so that the next insert cannot fail (call before changing other state).
  void reserve_one() {
    if ((size_ + 1) * 2 > mask_ + 1) rehash((mask_ + 1) * 2);
  }

  void insert(block* b) noexcept {
    std::size_t i = home(b->addr);
    while (slots_[i].key != 0) i = (i + 1) & mask_;
    slots_[i] = slot{b->addr, b};
    ++size_;
  }

  std::size_t find(std::uintptr_t key) const noexcept {
    if (key == 0) return npos;  // 0 marks an empty slot
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return i;
      if (slots_[i].key == 0) return npos;
    }
  }

  block* at(std::size_t i) const noexcept { return slots_[i].value; }

  void erase_at(std::size_t i) noexcept {
    // Pull back every later entry of the probe run whose home slot does not lie in (i, j].
    for (std::size_t j = (i + 1) & mask_; slots_[j].key != 0; j = (j + 1) & mask_) {
      const std::size_t k = home(slots_[j].key);
      if (((i - k) & mask_) < ((j - k) & mask_)) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = slot{};
    --size_;
  }

  std::size_t size() const noexcept { return size_; }

 private:
  struct slot {
    std::uintptr_t key = 0;
    block* value = nullptr;
  };

  std::size_t home(std::uintptr_t key) const noexcept {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(key >> granule_shift) * 0x9E3779B97F4A7C15ull) >>
                                    shift_);
  }

  GPUMEM_POOL_COLD void rehash(std::size_t capacity) {
    auto fresh = std::make_unique<slot[]>(capacity);
    std::unique_ptr<slot[]> old = std::move(slots_);
    const std::size_t old_capacity = old ? mask_ + 1 : 0;
    slots_ = std::move(fresh);
    mask_ = capacity - 1;
    shift_ = 64u - static_cast<unsigned>(__builtin_ctzll(capacity));
    size_ = 0;
    for (std::size_t i = 0; i < old_capacity; ++i) {
      if (old[i].key != 0) insert(old[i].value);
    }
  }

  std::unique_ptr<slot[]> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
};

// Block records come from chunks and go back to a free list: no heap traffic per split or merge.
class block_store {
 public:
  // Makes sure `n` records can be taken without allocating (call before changing other state).
  void reserve(std::size_t n) {
    while (free_count_ < n) add_chunk();
  }

  block* take() noexcept {
    block* b = free_;
    free_ = b->list_next;
    --free_count_;
    b->list_next = nullptr;
    return b;
  }

  // Whoever takes a record sets every field it uses; only what would outlive a reuse is reset.
  void give(block* b) noexcept {
    b->quarantined = false;
    b->mixed = false;
    b->used_on.clear();  // keeps capacity: a reused record does not allocate again
    b->events.clear();
    b->list_next = free_;
    free_ = b;
    ++free_count_;
  }

 private:
  static constexpr std::size_t chunk_blocks = 256;

  GPUMEM_POOL_COLD void add_chunk() {
    auto chunk = std::make_unique<block[]>(chunk_blocks);
    block* records = chunk.get();
    chunks_.push_back(std::move(chunk));
    for (std::size_t i = 0; i < chunk_blocks; ++i) give(&records[i]);
  }

  std::vector<std::unique_ptr<block[]>> chunks_;
  block* free_ = nullptr;
  std::size_t free_count_ = 0;
};

}  // namespace gpumem::detail::pool
