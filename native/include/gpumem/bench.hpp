// Native timing loops for bench/alloc: the cost of the allocator itself, with no JavaScript in
// the way. Each returns the median over `repeats` batches, in nanoseconds per malloc+free pair.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpumem/memory_resource.hpp"

namespace gpumem::bench {

struct timing {
  double median_ns_per_pair;
  double min_ns_per_pair;
  std::vector<double> batch_ns_per_pair;  // each batch's ns per pair, in the order run: the spread behind the median
};

// allocate(bytes) then deallocate, `iterations` times per batch.
timing pairs(memory_resource& resource, std::size_t bytes, std::size_t iterations, int repeats, stream_handle stream);

// A mixed-size trace: allocate sizes[i] in order while keeping at most `window` allocations live
// (the oldest is freed first); everything is freed at the end of a batch.
timing trace(memory_resource& resource, const std::uint64_t* sizes, std::size_t count, std::size_t window, int repeats,
             stream_handle stream);

}  // namespace gpumem::bench
