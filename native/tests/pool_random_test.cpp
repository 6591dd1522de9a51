// Randomised operations on pool_resource, checked after every step against a model of the live
// blocks: no two live blocks overlap, their contents survive, and the statistics add up exactly.
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "fake_ordering.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/pool_resource.hpp"
#include "pool_test_support.hpp"

using namespace gpumem;
using namespace gpumem::test;

namespace {

struct live_block {
  std::uintptr_t end;  // rounded end
  std::size_t bytes;
  std::size_t position;  // in model::order
  std::uint8_t tag;
};

// What the pool should hold, kept independently of it.
struct model {
  std::map<std::uintptr_t, live_block> live;
  std::vector<std::uintptr_t> order;  // the live starts, for picking one at random
  std::uint64_t allocated = 0;
  std::uint64_t rounded = 0;
  std::uint64_t allocs = 0;
  std::uint64_t frees = 0;
};

// Skewed towards small sizes: mostly under 4 KiB, some up to 1 MiB, a few up to 8 MiB.
std::size_t random_size(std::mt19937_64& rng) {
  const unsigned r = static_cast<unsigned>(rng() % 100);
  unsigned log2;
  if (r < 65) {
    log2 = static_cast<unsigned>(rng() % 13);  // 1 B .. 4 KiB
  } else if (r < 93) {
    log2 = 13 + static_cast<unsigned>(rng() % 8);  // .. 1 MiB
  } else {
    log2 = 21 + static_cast<unsigned>(rng() % 3);  // .. 8 MiB
  }
  const std::size_t top = std::size_t{1} << log2;
  return 1 + static_cast<std::size_t>(rng() % top);
}

void write_tag(void* p, std::size_t bytes, std::uint8_t tag) {
  auto* bytes_ptr = static_cast<std::uint8_t*>(p);
  bytes_ptr[bytes - 1] = static_cast<std::uint8_t>(tag ^ 0x5A);
  bytes_ptr[0] = tag;  // last, so that a 1-byte block holds the tag
}

bool tag_intact(const void* p, std::size_t bytes, std::uint8_t tag) {
  const auto* bytes_ptr = static_cast<const std::uint8_t*>(p);
  return bytes_ptr[0] == tag && (bytes == 1 || bytes_ptr[bytes - 1] == static_cast<std::uint8_t>(tag ^ 0x5A));
}

struct run_config {
  std::uint64_t seed;
  int steps;
  pool_options options;
  bool fake_events;  // a fake ordering whose events complete after a few queries
  std::size_t max_live;
};

void run_random(const run_config& config) {
  std::mt19937_64 rng(config.seed);
  auto log = std::make_shared<fake_ordering_log>();
  log->auto_complete_after = 3;
  host_resource host;
  auto pool = std::make_unique<pool_resource>(
      host, config.options, config.fake_events ? gpumem::test::make_fake_ordering(log) : make_host_ordering());
  const stream_handle streams[] = {stream_key(0x10), stream_key(0x20), stream_key(0x30)};
  model m;
  std::uint64_t expected_ooms = 0;

  auto check_state = [&](int step) {
    const resource_stats s = pool->stats();
    const resource_stats up = host.stats();
    bool ok = s.allocated_bytes == m.allocated && s.alloc_count == m.allocs && s.free_count == m.frees &&
              s.reserved_bytes >= m.rounded && s.oom_count == expected_ooms &&
              s.reserved_bytes == up.allocated_bytes && s.segment_count == up.alloc_count - up.free_count &&
              s.upstream_alloc_count == up.alloc_count && s.upstream_free_count == up.free_count &&
              s.largest_free_block >= 0 &&
              static_cast<std::uint64_t>(s.largest_free_block) <= s.reserved_bytes - m.rounded &&
              (config.options.max_reserved_bytes == 0 || s.reserved_bytes <= config.options.max_reserved_bytes);
    if (!ok) {
      FAIL("step " << step << ": stats disagree with the model (allocated " << s.allocated_bytes << " vs "
                   << m.allocated << ", reserved " << s.reserved_bytes << ", largest free " << s.largest_free_block
                   << ")");
    }
  };

  auto free_one = [&](std::size_t position, stream_handle stream, int step) {
    const std::uintptr_t start = m.order[position];
    auto it = m.live.find(start);
    void* p = reinterpret_cast<void*>(start);
    if (!tag_intact(p, it->second.bytes, it->second.tag)) {
      FAIL("step " << step << ": a live block was overwritten");
    }
    pool->deallocate(p, it->second.bytes, stream);
    m.allocated -= it->second.bytes;
    m.rounded -= it->second.end - start;
    ++m.frees;
    m.order[position] = m.order.back();
    m.live.find(m.order[position])->second.position = position;
    m.order.pop_back();
    m.live.erase(it);
  };

  for (int step = 0; step < config.steps; ++step) {
    const unsigned op = static_cast<unsigned>(rng() % 100);
    const stream_handle stream = streams[rng() % 3];
    if ((op < 50 && m.live.size() < config.max_live) || m.live.empty()) {
      const std::size_t bytes = random_size(rng);
      void* p = nullptr;
      const resource_stats before = pool->stats();
      try {
        p = pool->allocate(bytes, stream);
      } catch (const out_of_memory& e) {
        ++expected_ooms;
        const resource_stats after = pool->stats();
        if (e.requested_bytes() != bytes || after.allocated_bytes != before.allocated_bytes ||
            after.alloc_count != before.alloc_count) {
          FAIL("step " << step << ": a failed allocation changed the pool");
        }
        check_state(step);
        continue;
      }
      const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(p);
      const std::uintptr_t end = start + (bytes + 511) / 512 * 512;
      auto next = m.live.lower_bound(start);
      if ((next != m.live.end() && next->first < end) ||
          (next != m.live.begin() && std::prev(next)->second.end > start)) {
        FAIL("step " << step << ": a new block overlaps a live one");
      }
      const auto tag = static_cast<std::uint8_t>(rng());
      write_tag(p, bytes, tag);
      m.live.emplace(start, live_block{end, bytes, m.order.size(), tag});
      m.order.push_back(start);
      m.allocated += bytes;
      m.rounded += end - start;
      ++m.allocs;
    } else if (op < 88) {
      const std::size_t position = static_cast<std::size_t>(rng() % m.order.size());
      free_one(position, stream, step);
    } else if (op < 95) {
      const std::uintptr_t start = m.order[rng() % m.order.size()];
      pool->record_stream(reinterpret_cast<void*>(start), stream);
    } else if (op < 96) {
      const std::uint64_t reserved = pool->stats().reserved_bytes;
      pool->trim(rng() % 2 == 0 ? 0 : reserved / 2);
    } else {
      const std::uintptr_t start = m.order[rng() % m.order.size()];
      const live_block& b = m.live.at(start);
      if (pool->allocation_size(reinterpret_cast<void*>(start)) != b.bytes ||
          (b.end - start > 512 && pool->allocation_size(reinterpret_cast<void*>(start + 512)) != 0)) {
        FAIL("step " << step << ": allocation_size disagrees");
      }
    }
    if (step % 20000 == 19999) log->complete_all();
    check_state(step);
  }

  while (!m.order.empty()) free_one(m.order.size() - 1, streams[0], config.steps);
  log->complete_all();
  CHECK_EQ(pool->stats().allocated_bytes, 0u);
  pool->trim(0);
  const resource_stats s = pool->stats();
  CHECK_EQ(s.reserved_bytes, 0u);
  CHECK_EQ(s.segment_count, 0u);
  CHECK_EQ(s.alloc_count, m.allocs);
  CHECK_EQ(s.free_count, m.frees);
  CHECK_EQ(pool->pending_free_blocks(), 0u);
  CHECK_EQ(host.stats().allocated_bytes, 0u);
  pool.reset();
  CHECK_EQ(log->unreleased(), 0u);
  MESSAGE(m.allocs << " allocations, " << expected_ooms << " out of memory, " << log->events.size() << " events");
}

}  // namespace

TEST_CASE("random operations over three streams with pending events") {
  run_random(run_config{12345, 120000, pool_options{}, true, 300});
}

TEST_CASE("random operations under a reserve cap with small segments") {
  pool_options options;
  options.small_request_limit = 16 * KiB;
  options.small_segment_bytes = 64 * KiB;
  options.large_segment_rounding = 256 * KiB;
  options.max_reserved_bytes = 48 * MiB;
  run_random(run_config{987654321, 100000, options, false, 200});
}
