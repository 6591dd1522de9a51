#include "gpumem/bench.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <utility>
#include <vector>

namespace gpumem::bench {
namespace {

using clock_type = std::chrono::steady_clock;

timing summarise(std::vector<double> ns_per_pair) {
  std::vector<double> sorted = ns_per_pair;
  std::sort(sorted.begin(), sorted.end());
  return {sorted[sorted.size() / 2], sorted.front(), std::move(ns_per_pair)};
}

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

void run_trace(memory_resource& resource, const std::uint64_t* sizes, std::size_t count, std::size_t window,
               stream_handle stream, std::deque<std::pair<void*, std::size_t>>& live) {
  for (std::size_t i = 0; i < count; ++i) {
    if (live.size() >= window) {
      resource.deallocate(live.front().first, live.front().second, stream);
      live.pop_front();
    }
    live.emplace_back(resource.allocate(sizes[i], stream), sizes[i]);
  }
  while (!live.empty()) {
    resource.deallocate(live.front().first, live.front().second, stream);
    live.pop_front();
  }
}

}  // namespace

timing pairs(memory_resource& resource, std::size_t bytes, std::size_t iterations, int repeats, stream_handle stream) {
  iterations = std::max<std::size_t>(iterations, 1);
  repeats = std::max(repeats, 1);
  for (std::size_t i = 0; i < std::min<std::size_t>(iterations, 1000); ++i)  // warm-up: segments, caches
    resource.deallocate(resource.allocate(bytes, stream), bytes, stream);
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    auto start = clock_type::now();
    for (std::size_t i = 0; i < iterations; ++i) {
      void* p = resource.allocate(bytes, stream);
      resource.deallocate(p, bytes, stream);
    }
    samples.push_back(seconds_since(start) * 1e9 / static_cast<double>(iterations));
  }
  return summarise(std::move(samples));
}

timing trace(memory_resource& resource, const std::uint64_t* sizes, std::size_t count, std::size_t window, int repeats,
             stream_handle stream) {
  repeats = std::max(repeats, 1);
  window = std::max<std::size_t>(window, 1);
  std::deque<std::pair<void*, std::size_t>> live;
  run_trace(resource, sizes, count, window, stream, live);  // warm-up
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    auto start = clock_type::now();
    run_trace(resource, sizes, count, window, stream, live);
    samples.push_back(seconds_since(start) * 1e9 / static_cast<double>(std::max<std::size_t>(count, 1)));
  }
  return summarise(std::move(samples));
}

}  // namespace gpumem::bench
