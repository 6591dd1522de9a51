// Nanoseconds per allocate/deallocate pair on pool_resource in steady state (not a ctest test; run
// it by hand: build-tests/tests/pool_microbench [iterations]). Also a mixed-size pattern, and 2, 4
// and 8 threads sharing the pool. Build with -DGPUMEM_POOL_STD_MUTEX to compare the pool's lock
// with std::mutex.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gpumem/host_resource.hpp"
#include "gpumem/pool_resource.hpp"

using namespace gpumem;

namespace {

using clock_type = std::chrono::steady_clock;

double ns_since(clock_type::time_point start, long pairs) {
  return std::chrono::duration<double, std::nano>(clock_type::now() - start).count() / static_cast<double>(pairs);
}

// Best of a few runs: the machine's noise only ever adds time.
template <class F>
double best_of(int runs, F measure) {
  double best = 1e300;
  for (int i = 0; i < runs; ++i) {
    const double ns = measure();
    best = ns < best ? ns : best;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const long iterations = argc > 1 ? std::atol(argv[1]) : 5000000;
  host_resource host;
  pool_resource pool(host);
  memory_resource& resource = pool;  // through the public, non-virtual interface, as callers use it
  stream_handle stream = nullptr;

  const std::size_t sizes[] = {256, 64 << 10, 1 << 20, 64 << 20};
  const char* names[] = {"256 B", "64 KiB", "1 MiB", "64 MiB"};
  for (int k = 0; k < 4; ++k) {
    const std::size_t n = sizes[k];
    resource.deallocate(resource.allocate(n, stream), n, stream);  // first round: grows the pool
    const auto upstream_before = pool.stats().upstream_alloc_count;
    const double ns = best_of(7, [&] {
      const auto start = clock_type::now();
      for (long i = 0; i < iterations; ++i) {
        void* p = resource.allocate(n, stream);
        resource.deallocate(p, n, stream);
      }
      return ns_since(start, iterations);
    });
    const auto upstream_calls = pool.stats().upstream_alloc_count - upstream_before;
    std::printf("%-8s %6.1f ns/pair  (upstream allocations in steady state: %llu)\n", names[k], ns,
                static_cast<unsigned long long>(upstream_calls));
  }

  // Mixed: eight sizes across both classes, four of them live across iterations.
  {
    const std::size_t mix[] = {256, 3000, 64 << 10, 200 << 10, 1 << 20, 3 << 20, 512, 64 << 20};
    void* held[8] = {};
    for (int i = 0; i < 8; ++i) held[i] = resource.allocate(mix[i], stream);
    auto round = [&] {
      for (int i = 0; i < 8; i += 2) {  // replace the even ones, keep the odd ones live
        resource.deallocate(held[i], mix[i], stream);
        held[i] = resource.allocate(mix[i], stream);
      }
      for (int i = 1; i < 8; i += 2) {
        void* p = resource.allocate(mix[i], stream);
        resource.deallocate(p, mix[i], stream);
      }
    };
    round();  // the first round grows the pool
    const long rounds = iterations / 8;
    const auto upstream_before = pool.stats().upstream_alloc_count;
    const double ns = best_of(7, [&] {
      const auto start = clock_type::now();
      for (long r = 0; r < rounds; ++r) round();
      return ns_since(start, rounds * 8);
    });
    std::printf("mixed    %6.1f ns/pair  (upstream allocations in steady state: %llu)\n", ns,
                static_cast<unsigned long long>(pool.stats().upstream_alloc_count - upstream_before));
    for (int i = 0; i < 8; ++i) resource.deallocate(held[i], mix[i], stream);
  }

  // Several threads, one stream each, 256 B pairs: the lock under contention. Throughput, so wall
  // time over all the pairs of all the threads.
  for (int thread_count : {2, 4, 8}) {
    const long per_thread = iterations / thread_count;
    const auto start = clock_type::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < thread_count; ++t) {
      threads.emplace_back([&, t] {
        stream_handle s = reinterpret_cast<stream_handle>(static_cast<std::uintptr_t>(0x10 + t));
        for (long i = 0; i < per_thread; ++i) resource.deallocate(resource.allocate(256, s), 256, s);
      });
    }
    for (auto& th : threads) th.join();
    std::printf("%d threads %5.1f ns/pair (wall time over all pairs)\n", thread_count,
                ns_since(start, thread_count * per_thread));
  }
  return 0;
}
