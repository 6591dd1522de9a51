// The host-link benchmark (bench/link): how fast a kernel reaches host memory, measured on one GPU
// in one run, against the copies and the managed-memory paths that move the data instead:
//
//   zero-copy-read     a kernel reading mapped pinned memory in place (float4 loads, grid-stride),
//                      at each grid size of `blocks_per_sm`;
//   zero-copy-write    the same kernel shape writing it;
//   h2d-copy/d2h-copy  cudaMemcpyAsync between pinned host memory and device memory;
//   managed-prefetch   cudaMemPrefetchAsync of managed memory to the device, its pages first touched
//                      on the host (a memset on the host before every repetition);
//   managed-fault-read a kernel reading managed memory whose pages are on the host (the memset before
//                      every repetition moves them back, so every repetition faults them in);
//   device-read        the read kernel on device memory, the reference.
//
// Every figure is `repetitions` timings (CUDA events on one stream) of `bytes` moved, in GB/s
// (10^9 bytes per second). Sizes are bounded for safety: the buffer is the smallest of `bytes`, half
// the host's MemAvailable (pinned memory) and half the device's free memory (cudaMemGetInfo; the
// device buffer is freed before the managed one is made, so managed memory never exceeds half the
// free memory either). Throws invalid_state without CUDA or without a device, invalid_argument for
// bad options.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gpumem::bench {

struct link_options {
  int device = 0;
  std::uint64_t bytes = std::uint64_t{1} << 30;  // per buffer, before the safety bounds
  int repetitions = 5;
  std::vector<int> blocks_per_sm = {2, 4, 8, 16};
  int threads_per_block = 512;
};

struct link_measurement {
  std::string kind;       // zero-copy-read, zero-copy-write, h2d-copy, d2h-copy, managed-prefetch, managed-fault-read, device-read
  int blocks_per_sm = 0;  // kernels: the grid is blocks_per_sm x multiprocessors; 0 for copies and prefetch
  int grid = 0;           // blocks launched (0 for copies and prefetch)
  std::uint64_t bytes = 0;
  std::vector<double> gbps;  // one per repetition, in order
};

struct link_result {
  int device = 0;
  std::string device_name;
  int multiprocessors = 0;
  int threads_per_block = 0;
  int repetitions = 0;
  std::uint64_t requested_bytes = 0;
  std::uint64_t bytes = 0;                  // what every measurement moved (after the safety bounds)
  std::uint64_t host_available_bytes = 0;   // MemAvailable at the start
  std::uint64_t device_free_bytes = 0;      // cudaMemGetInfo's free at the start
  std::vector<link_measurement> measurements;
  std::vector<std::string> skipped;         // measurements not made here, each with the reason
};

// Runs every measurement on `options.device`.
link_result link_bandwidth(const link_options& options);

}  // namespace gpumem::bench
