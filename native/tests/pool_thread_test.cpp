// pool_resource shared by several threads, each on its own stream: blocks never overlap (the
// pattern each thread writes survives until it frees the block) and the final statistics are exact.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "fake_ordering.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/pool_resource.hpp"

using namespace gpumem;
using gpumem::test::stream_key;

namespace {

constexpr int thread_count = 4;
constexpr int allocations_per_thread = 250000;
constexpr int slots_per_thread = 16;  // blocks a thread keeps live at once

std::size_t random_size(std::mt19937& rng) {
  const unsigned r = rng() % 1000;
  if (r < 800) return 1 + rng() % 4096;
  if (r < 990) return 4097 + rng() % (256 * 1024);
  return 1024 * 1024 + rng() % (4 * 1024 * 1024);
}

struct slot {
  std::uint64_t* ptr = nullptr;
  std::size_t bytes = 0;
  std::uint64_t stamp = 0;
};

// Words a block stamps: every word of small blocks; of larger ones the word at each 512-byte
// boundary and the last. Blocks start on 512-byte boundaries of their segment (the pool's rounding),
// so a block handed out while it overlaps another live one overwrites one of the other's stamps (or
// the other overwrites one of its own), and the check before the free finds it.
constexpr std::size_t stride_words = pool_resource::rounding / sizeof(std::uint64_t);

template <class F>
void for_each_stamped_word(const slot& s, F&& f) {
  const std::size_t words = s.bytes / sizeof(std::uint64_t);
  if (words <= 64) {
    for (std::size_t i = 0; i < words; ++i) f(i);
    return;
  }
  for (std::size_t i = 0; i < words; i += stride_words) f(i);
  if ((words - 1) % stride_words != 0) f(words - 1);
}

// Writes a value unique to this thread, allocation and word into each stamped word (tiny blocks:
// every byte).
void stamp(slot& s) {
  if (s.bytes < sizeof(std::uint64_t)) {
    std::memset(s.ptr, static_cast<int>(s.stamp & 0xFF), s.bytes);
    return;
  }
  for_each_stamped_word(s, [&](std::size_t i) { s.ptr[i] = s.stamp + i; });
}

bool intact(const slot& s) {
  if (s.bytes < sizeof(std::uint64_t)) {
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(s.ptr);
    for (std::size_t i = 0; i < s.bytes; ++i) {
      if (bytes[i] != static_cast<std::uint8_t>(s.stamp & 0xFF)) return false;
    }
    return true;
  }
  bool ok = true;
  for_each_stamped_word(s, [&](std::size_t i) { ok = ok && s.ptr[i] == s.stamp + i; });
  return ok;
}

}  // namespace

TEST_CASE("four threads share one pool") {
  host_resource host;
  pool_resource pool(host);
  std::atomic<int> corrupted{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < thread_count; ++t) {
    threads.emplace_back([&, t] {
      const stream_handle stream = stream_key(0x100 + static_cast<std::uintptr_t>(t));
      std::mt19937 rng(1000 + t);
      slot slots[slots_per_thread];
      try {
        for (int i = 0; i < allocations_per_thread; ++i) {
          slot& s = slots[i % slots_per_thread];
          if (s.ptr != nullptr) {
            if (!intact(s)) corrupted.fetch_add(1);
            pool.deallocate(s.ptr, s.bytes, stream);
          }
          s.bytes = random_size(rng);
          s.ptr = static_cast<std::uint64_t*>(pool.allocate(s.bytes, stream));
          s.stamp = (static_cast<std::uint64_t>(t) << 56) | (static_cast<std::uint64_t>(i) << 16);
          stamp(s);
          if (i % 4096 == 0) (void)pool.stats();  // readers run concurrently with writers
        }
        for (slot& s : slots) {
          if (!intact(s)) corrupted.fetch_add(1);
          pool.deallocate(s.ptr, s.bytes, stream);
        }
      } catch (...) {
        errors.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK_EQ(corrupted.load(), 0);
  CHECK_EQ(errors.load(), 0);
  const resource_stats s = pool.stats();
  CHECK_EQ(s.allocated_bytes, 0u);
  CHECK_EQ(s.alloc_count, static_cast<std::uint64_t>(thread_count) * allocations_per_thread);
  CHECK_EQ(s.free_count, s.alloc_count);
  CHECK(s.upstream_alloc_count < 200u);  // blocks are reused, not fetched upstream each time
  pool.trim(0);
  CHECK_EQ(pool.stats().reserved_bytes, 0u);
  CHECK_EQ(host.stats().allocated_bytes, 0u);
}
