// Nanoseconds per allocate/deallocate pair of a cached block: expandable_resource over the host twin
// (mmap granules) against pool_resource over host memory, in one process, batches of the two taking
// turns so that the machine's drift hits both alike (not a ctest test; run it by hand:
// build-tests/tests/expandable_microbench [pairs per batch] [batches] [case]). The sizes and the mixed
// trace (20,000 sizes from 64 B to 32 MiB, 64 live) are bench/alloc's. Prints, per case, the median
// and the range over the batches and the ratio of the medians.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpumem/expandable_resource.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/vmm.hpp"
#include "gpumem/pool_resource.hpp"

using namespace gpumem;

namespace {

using clock_type = std::chrono::steady_clock;

double ns_since(clock_type::time_point start, std::size_t operations) {
  return std::chrono::duration<double, std::nano>(clock_type::now() - start).count() / static_cast<double>(operations);
}

// bench/alloc's mixed trace (the same xorshift and the same thresholds).
std::vector<std::size_t> mixed_trace(std::size_t count) {
  std::uint32_t x = 0x9e3779b9u;
  auto rand = [&x] {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return static_cast<double>(x) / 4294967296.0;
  };
  constexpr double MiB = 1 << 20;
  std::vector<std::size_t> sizes(count);
  for (auto& s : sizes) {
    const double r = rand();
    if (r < 0.6) {
      s = static_cast<std::size_t>(64 + static_cast<std::size_t>(rand() * 16 * 1024));
    } else if (r < 0.9) {
      s = static_cast<std::size_t>(16 * 1024 + static_cast<std::size_t>(rand() * 2 * MiB));
    } else {
      s = static_cast<std::size_t>(2 * MiB + static_cast<std::size_t>(rand() * 30 * MiB));
    }
  }
  return sizes;
}

// One batch: `pairs` allocate/deallocate pairs of `bytes`, or one pass of the trace (ns per allocation).
double batch(memory_resource& resource, std::size_t bytes, std::size_t pairs, const std::vector<std::size_t>* trace) {
  stream_handle stream = nullptr;
  if (trace == nullptr) {
    const auto start = clock_type::now();
    for (std::size_t i = 0; i < pairs; ++i) resource.deallocate(resource.allocate(bytes, stream), bytes, stream);
    return ns_since(start, pairs);
  }
  std::deque<std::pair<void*, std::size_t>> live;
  const auto start = clock_type::now();
  for (std::size_t n : *trace) {
    if (live.size() >= 64) {
      resource.deallocate(live.front().first, live.front().second, stream);
      live.pop_front();
    }
    live.emplace_back(resource.allocate(n, stream), n);
  }
  for (const auto& [p, n] : live) resource.deallocate(p, n, stream);
  return ns_since(start, trace->size());
}

struct summary {
  double median, low, high;
};

summary summarise(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples.front(), samples.back()};
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t pairs = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 200000;
  const int batches = argc > 2 ? std::atoi(argv[2]) : 15;
  const std::string only = argc > 3 ? argv[3] : "";  // one case by name (e.g. "64 MiB"), for a profiler
  host_resource host;
  pool_resource pool(host);
  expandable_resource expandable(make_host_vmm());
  memory_resource* resources[] = {&pool, &expandable};  // the public interface, as callers use it
  const std::vector<std::size_t> trace = mixed_trace(20000);

  struct test_case {
    const char* name;
    std::size_t bytes;
    const std::vector<std::size_t>* trace;
  };
  const test_case cases[] = {{"256 B", 256, nullptr},
                             {"64 KiB", 64 << 10, nullptr},
                             {"1 MiB", 1 << 20, nullptr},
                             {"64 MiB", 64 << 20, nullptr},
                             {"mixed", 0, &trace}};
  std::printf("ns per pair, median [min-max] of %d batches (%zu pairs a batch; mixed: %zu allocations)\n", batches,
              pairs, trace.size());
  std::printf("%-8s %-26s %-26s %s\n", "case", "pool (host)", "expandable (host twin)", "ratio");
  for (const test_case& c : cases) {
    if (!only.empty() && only != c.name) continue;
    std::vector<double> samples[2];
    for (memory_resource* r : resources) batch(*r, c.bytes, 1000, c.trace);  // warm-up: maps, segments, caches
    for (int i = 0; i < batches; ++i) {
      for (int k = 0; k < 2; ++k) samples[k].push_back(batch(*resources[k], c.bytes, pairs, c.trace));
    }
    const summary p = summarise(samples[0]);
    const summary e = summarise(samples[1]);
    char pool_cell[64], expandable_cell[64];
    std::snprintf(pool_cell, sizeof pool_cell, "%6.1f [%.1f-%.1f]", p.median, p.low, p.high);
    std::snprintf(expandable_cell, sizeof expandable_cell, "%6.1f [%.1f-%.1f]", e.median, e.low, e.high);
    std::printf("%-8s %-26s %-26s %.2fx\n", c.name, pool_cell, expandable_cell, e.median / p.median);
  }
  const resource_stats s = expandable.stats();
  std::printf("expandable: %llu runs mapped, %llu unmapped over the whole run\n",
              static_cast<unsigned long long>(s.upstream_alloc_count),
              static_cast<unsigned long long>(s.upstream_free_count));
  return 0;
}
