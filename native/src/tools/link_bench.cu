// The host-link benchmark (gpumem/link_bench.hpp): kernels reading and writing mapped pinned memory
// in place, copies, managed memory prefetched and faulted in, and device memory as the reference.
#include "gpumem/link_bench.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "core/cuda_runtime_check.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/pinned_host_resource.hpp"

namespace gpumem::bench {
namespace {

using detail::check_cuda;

constexpr std::uint64_t page = 4096;

// Sums float4 values, grid-stride. The store is conditional on the sum, which the data (zeros) never
// meets: the loads cannot be optimised away and nothing is written.
__global__ void read_kernel(const float4* __restrict__ p, std::size_t n, float4* out) {
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const float4 v = p[i];
    acc.x += v.x;
    acc.y += v.y;
    acc.z += v.z;
    acc.w += v.w;
  }
  if (acc.x + acc.y + acc.z + acc.w == -1.0f) out[0] = acc;
}

__global__ void write_kernel(float4* p, std::size_t n, float value) {
  const float4 v = make_float4(value, value, value, value);
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    p[i] = v;
}

// Owners that give their CUDA object back on every path; destructors never throw.
struct pinned_buffer {
  void* ptr = nullptr;
  ~pinned_buffer() { reset(); }
  void reset() {
    if (ptr != nullptr && cudaFreeHost(ptr) != cudaSuccess) cudaGetLastError();
    ptr = nullptr;
  }
};
struct device_buffer {  // cudaMalloc or cudaMallocManaged memory
  void* ptr = nullptr;
  ~device_buffer() { reset(); }
  void reset() {
    if (ptr != nullptr && cudaFree(ptr) != cudaSuccess) cudaGetLastError();
    ptr = nullptr;
  }
};
struct stream_owner {
  cudaStream_t stream = nullptr;
  ~stream_owner() {
    if (stream != nullptr && cudaStreamDestroy(stream) != cudaSuccess) cudaGetLastError();
  }
};
struct event_owner {
  cudaEvent_t event = nullptr;
  ~event_owner() {
    if (event != nullptr && cudaEventDestroy(event) != cudaSuccess) cudaGetLastError();
  }
};

[[noreturn]] void reject(const char* name, const std::string& expected, long long received) {
  throw invalid_argument(invalid_argument::kind::range, name,
                         std::string("Expected ") + expected + " for " + name + " but received " + std::to_string(received));
}

void check_options(const link_options& o) {
  if (o.device < 0) reject("device", "non-negative integer", o.device);
  if (o.bytes < page) reject("bytes", "at least 4096", static_cast<long long>(o.bytes));
  if (o.repetitions < 1 || o.repetitions > 1000) reject("repetitions", "an integer from 1 to 1000", o.repetitions);
  if (o.threads_per_block < 32 || o.threads_per_block > 1024 || o.threads_per_block % 32 != 0)
    reject("threadsPerBlock", "a multiple of 32 from 32 to 1024", o.threads_per_block);
  if (o.blocks_per_sm.empty()) {
    throw invalid_argument(invalid_argument::kind::range, "blocksPerSm", "Expected at least one grid size for blocksPerSm but received none");
  }
  for (int b : o.blocks_per_sm) {
    if (b < 1 || b > 1024) reject("blocksPerSm", "integers from 1 to 1024", b);
  }
}

class timer {
 public:
  explicit timer(cudaStream_t stream) : stream_(stream) {
    check_cuda(cudaEventCreate(&start_.event), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop_.event), "cudaEventCreate");
  }
  // Milliseconds `work` (queued on the stream) took between two events.
  template <class F>
  double ms(F&& work) {
    check_cuda(cudaEventRecord(start_.event, stream_), "cudaEventRecord");
    work();
    check_cuda(cudaGetLastError(), "launch");
    check_cuda(cudaEventRecord(stop_.event, stream_), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop_.event), "cudaEventSynchronize");
    float elapsed = 0;
    check_cuda(cudaEventElapsedTime(&elapsed, start_.event, stop_.event), "cudaEventElapsedTime");
    return elapsed;
  }

 private:
  cudaStream_t stream_;
  event_owner start_;
  event_owner stop_;
};

double gbps(std::uint64_t bytes, double ms) { return ms > 0 ? static_cast<double>(bytes) / (ms * 1e6) : 0.0; }

}  // namespace

link_result link_bandwidth(const link_options& options) {
  check_options(options);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  if (count == 0) throw invalid_state("linkBench needs a CUDA device, and there is none here");
  if (options.device >= count) reject("device", "a CUDA device index below " + std::to_string(count), options.device);
  detail::device_scope scope(options.device);

  cudaDeviceProp props{};
  check_cuda(cudaGetDeviceProperties(&props, options.device), "cudaGetDeviceProperties");
  const auto host = read_host_memory_info();
  if (!host) throw invalid_state("linkBench: cannot read MemAvailable from /proc/meminfo, so cannot bound the pinned buffer");
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");

  link_result r;
  r.device = options.device;
  r.device_name = props.name;
  r.multiprocessors = props.multiProcessorCount;
  r.threads_per_block = options.threads_per_block;
  r.repetitions = options.repetitions;
  r.requested_bytes = options.bytes;
  r.host_available_bytes = host->available_bytes;
  r.device_free_bytes = free_bytes;
  const std::uint64_t bytes =
      std::min({options.bytes, host->available_bytes / 2, static_cast<std::uint64_t>(free_bytes) / 2}) / page * page;
  if (bytes < page) {
    throw invalid_state("linkBench: too little memory for a buffer of 4 KiB within half the host's available memory (" +
                        format_bytes_brief(host->available_bytes) + ") and half the device's free memory (" +
                        format_bytes_brief(free_bytes) + ")");
  }
  r.bytes = bytes;
  const std::size_t n = bytes / sizeof(float4);
  const int threads = options.threads_per_block;
  const int reps = options.repetitions;

  stream_owner owned;
  check_cuda(cudaStreamCreateWithFlags(&owned.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  cudaStream_t stream = owned.stream;
  timer time(stream);

  device_buffer out;  // the read kernel's never-taken store
  check_cuda(cudaMalloc(&out.ptr, sizeof(float4)), "cudaMalloc");
  float4* sink = static_cast<float4*>(out.ptr);

  auto add = [&](const char* kind, int blocks_per_sm, int grid, std::uint64_t moved) -> link_measurement& {
    link_measurement m;
    m.kind = kind;
    m.blocks_per_sm = blocks_per_sm;
    m.grid = grid;
    m.bytes = moved;
    r.measurements.push_back(std::move(m));
    return r.measurements.back();
  };

  // ---- pinned and device memory: zero-copy, copies, the device reference -------------------------
  {
    pinned_buffer pinned;
    const cudaError_t status = cudaHostAlloc(&pinned.ptr, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
    if (status != cudaSuccess) {
      pinned.ptr = nullptr;
      check_cuda(status, "cudaHostAlloc");
    }
    std::memset(pinned.ptr, 0, bytes);
    void* mapped = nullptr;
    check_cuda(cudaHostGetDevicePointer(&mapped, pinned.ptr, 0), "cudaHostGetDevicePointer");
    device_buffer dev;
    check_cuda(cudaMalloc(&dev.ptr, bytes), "cudaMalloc");
    check_cuda(cudaMemsetAsync(dev.ptr, 0, bytes, stream), "cudaMemsetAsync");

    auto kernel_rows = [&](const char* kind, void* ptr, bool write) {
      for (int per_sm : options.blocks_per_sm) {
        const int grid = per_sm * props.multiProcessorCount;
        auto launch = [&] {
          if (write) write_kernel<<<grid, threads, 0, stream>>>(static_cast<float4*>(ptr), n, 0.0f);
          else read_kernel<<<grid, threads, 0, stream>>>(static_cast<const float4*>(ptr), n, sink);
        };
        time.ms(launch);  // warm-up
        link_measurement& m = add(kind, per_sm, grid, bytes);
        for (int i = 0; i < reps; ++i) m.gbps.push_back(gbps(bytes, time.ms(launch)));
      }
    };
    kernel_rows("zero-copy-read", mapped, false);
    kernel_rows("zero-copy-write", mapped, true);

    auto copy_row = [&](const char* kind, void* dst, const void* src) {
      auto copy = [&] { check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync"); };
      time.ms(copy);  // warm-up
      link_measurement& m = add(kind, 0, 0, bytes);
      for (int i = 0; i < reps; ++i) m.gbps.push_back(gbps(bytes, time.ms(copy)));
    };
    copy_row("h2d-copy", dev.ptr, pinned.ptr);
    copy_row("d2h-copy", pinned.ptr, dev.ptr);

    kernel_rows("device-read", dev.ptr, false);
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }  // pinned and device buffers freed: the managed buffer never shares the memory with them

  // ---- managed memory: prefetch, and faulting in from the host -----------------------------------
  if (!props.managedMemory) {
    r.skipped.push_back("managed-prefetch, managed-fault-read: the device does not support managed memory");
    return r;
  }
  if (!props.concurrentManagedAccess) {
    r.skipped.push_back(
        "managed-prefetch, managed-fault-read: the device has no concurrent managed access (no on-demand page faults or "
        "prefetch here)");
    return r;
  }
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  const std::uint64_t managed_bytes = std::min<std::uint64_t>(bytes, free_bytes / 2) / page * page;
  if (managed_bytes < page) {
    r.skipped.push_back("managed-prefetch, managed-fault-read: less than 8 KiB of device memory free");
    return r;
  }
  const std::size_t managed_n = managed_bytes / sizeof(float4);
  device_buffer managed;
  check_cuda(cudaMallocManaged(&managed.ptr, managed_bytes, cudaMemAttachGlobal), "cudaMallocManaged");
  // Pages on the host: touched there (first touch, and after the GPU took them, a fault back each).
  auto touch_on_host = [&] {
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    std::memset(managed.ptr, 0, managed_bytes);
  };
  touch_on_host();
  {
    auto prefetch = [&] {
      check_cuda(cudaMemPrefetchAsync(managed.ptr, managed_bytes, detail::device_location(options.device), 0, stream),
                 "cudaMemPrefetchAsync");
    };
    time.ms(prefetch);  // warm-up
    link_measurement& m = add("managed-prefetch", 0, 0, managed_bytes);
    for (int i = 0; i < reps; ++i) {
      touch_on_host();
      m.gbps.push_back(gbps(managed_bytes, time.ms(prefetch)));
    }
  }
  for (int per_sm : options.blocks_per_sm) {
    const int grid = per_sm * props.multiProcessorCount;
    auto launch = [&] { read_kernel<<<grid, threads, 0, stream>>>(static_cast<const float4*>(managed.ptr), managed_n, sink); };
    link_measurement& m = add("managed-fault-read", per_sm, grid, managed_bytes);
    for (int i = 0; i < reps; ++i) {
      touch_on_host();  // every repetition faults the pages in again
      m.gbps.push_back(gbps(managed_bytes, time.ms(launch)));
    }
  }
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return r;
}

}  // namespace gpumem::bench
