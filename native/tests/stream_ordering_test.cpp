// The stream orderings: host ordering needs no events; CUDA ordering exists only in CUDA builds
// (and is exercised here when a device is present).
#include <doctest/doctest.h>

#include "gpumem/errors.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/pool_resource.hpp"
#include "gpumem/stream_ordering.hpp"

#ifdef GPUMEM_WITH_CUDA
#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>
#endif

using namespace gpumem;

TEST_CASE("host ordering events are always complete") {
  auto ordering = make_host_ordering();
  int key = 0;
  event_handle event = ordering->record(&key);
  CHECK(event == nullptr);
  CHECK(ordering->query(event));
  ordering->wait(nullptr, event);
  ordering->synchronize(event);
  ordering->release(event);
}

TEST_CASE("make ordering picks host ordering for host memory") {
  auto ordering = make_ordering(memory_kind::host, -1);
  REQUIRE(ordering != nullptr);
  CHECK(ordering->record(nullptr) == nullptr);
}

TEST_CASE("a pool over host memory defaults to host ordering") {
  host_resource host;
  pool_resource pool(host);
  void* p = pool.allocate(100);
  pool.record_stream(p, reinterpret_cast<stream_handle>(0x1));
  pool.deallocate(p, 100);
  CHECK_EQ(pool.pending_free_blocks(), 0u);  // host events are complete at once
  void* q = pool.allocate(100);
  CHECK_EQ(q, p);
  pool.deallocate(q, 100);
}

TEST_CASE("work queued on a host stream runs when the stream is reached") {
  auto ordering = make_host_ordering();
  int a = 0;
  int b = 0;
  auto* A = static_cast<stream_handle>(&a);
  auto* B = static_cast<stream_handle>(&b);
  int runs = 0;
  defer_host_work(A, [&runs] { ++runs; });
  event_handle event = ordering->record(A);  // behind the queued work
  REQUIRE(event != nullptr);
  CHECK(!ordering->query(event));
  CHECK(ordering->record(B) == nullptr);  // nothing queued on B
  ordering->wait(B, event);                // B's later work runs on this thread: A's runs now
  CHECK_EQ(runs, 1);
  CHECK(ordering->query(event));
  ordering->release(event);
  defer_host_work(A, [&runs] { ++runs; });
  defer_host_work(B, [&runs] { runs += 10; });
  synchronize_host_stream(A);
  CHECK_EQ(runs, 2);
  synchronize_host_streams();
  CHECK_EQ(runs, 12);
  CHECK(ordering->record(A) == nullptr);
}

TEST_CASE("a pool over host memory hands a block to another stream after the freeing streams work") {
  host_resource host;
  pool_resource pool(host);
  int a = 0;
  int b = 0;
  auto* A = static_cast<stream_handle>(&a);
  auto* B = static_cast<stream_handle>(&b);
  auto* p = static_cast<unsigned char*>(pool.allocate(256, A));
  defer_host_work(A, [p] { p[0] = 0xA; });  // A is still busy with p
  pool.deallocate(p, 256, A);
  auto* q = static_cast<unsigned char*>(pool.allocate(256, B));
  q[0] = 0xB;  // B's work, after the allocation
  synchronize_host_streams();
  CHECK_EQ(static_cast<int>(q[0]), 0xB);  // a reused block waited for A's work first
  pool.deallocate(q, 256, B);
}

#ifndef GPUMEM_WITH_CUDA

TEST_CASE("cuda ordering is refused without cuda") {
  CHECK_THROWS_AS(make_cuda_ordering(0), invalid_state);
  CHECK_THROWS_AS(make_ordering(memory_kind::device, 0), invalid_state);
  CHECK_THROWS_AS(make_ordering(memory_kind::managed, 0), invalid_state);
}

#else

TEST_CASE("cuda ordering records waits and synchronizes") {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    MESSAGE("no CUDA device: skipped");
    return;
  }
  auto ordering = make_cuda_ordering(0);
  cudaStream_t producer = nullptr;
  cudaStream_t consumer = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking) == cudaSuccess);
  void* device_memory = nullptr;
  REQUIRE(cudaMalloc(&device_memory, 64 << 20) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(device_memory, 1, 64 << 20, producer) == cudaSuccess);
  event_handle event = ordering->record(producer);
  CHECK(event != nullptr);
  ordering->wait(consumer, event);
  ordering->synchronize(event);
  CHECK(ordering->query(event));
  ordering->release(event);
  event_handle again = ordering->record(consumer);
  CHECK_EQ(again, event);  // from the cache
  ordering->synchronize(again);
  ordering->release(again);
  CHECK(ordering->query(nullptr));
  CHECK_THROWS_AS(make_cuda_ordering(devices + 5), cuda_error);
  cudaFree(device_memory);
  cudaStreamDestroy(producer);
  cudaStreamDestroy(consumer);
}

namespace {

// cudaMalloc/cudaFree and nothing else, so this test needs no other resource of the core.
class plain_device_resource final : public memory_resource {
  void* do_allocate(std::size_t bytes, stream_handle) override {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      throw out_of_memory("cudaMalloc failed", bytes, resource_stats{});
    }
    return p;
  }
  void do_deallocate(void* p, std::size_t, stream_handle) override { cudaFree(p); }
  resource_stats do_stats() const override { return {}; }
  void do_reset_peak() override {}
  std::size_t do_allocation_size(const void*) const override { return 0; }
  memory_kind do_kind() const noexcept override { return memory_kind::device; }
  int do_device() const noexcept override { return 0; }
};

void CUDART_CB sleep_on_stream(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

}  // namespace

TEST_CASE("a pool over device memory waits for recorded streams") {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    MESSAGE("no CUDA device: skipped");
    return;
  }
  plain_device_resource device_memory;
  pool_resource pool(device_memory);  // CUDA events: the default ordering for device memory
  cudaStream_t a = nullptr;
  cudaStream_t b = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) == cudaSuccess);

  void* p = pool.allocate(1 << 20, a);
  pool.record_stream(p, b);
  REQUIRE(cudaLaunchHostFunc(b, sleep_on_stream, nullptr) == cudaSuccess);  // b is busy for a while
  pool.deallocate(p, 1 << 20, a);
  CHECK_EQ(pool.pending_free_blocks(), 1u);
  void* q = pool.allocate(1 << 20, a);
  CHECK(q != p);  // p waits for b
  REQUIRE(cudaStreamSynchronize(b) == cudaSuccess);
  CHECK_EQ(pool.pending_free_blocks(), 0u);
  void* r = pool.allocate(1 << 20, a);
  CHECK_EQ(r, p);

  // b borrows a's free memory behind an event.
  pool.deallocate(q, 1 << 20, a);
  void* s = pool.allocate(1 << 20, b);
  CHECK_EQ(s, q);
  CHECK_EQ(pool.stats().upstream_alloc_count, 1u);
  pool.deallocate(r, 1 << 20, a);
  pool.deallocate(s, 1 << 20, b);
  pool.trim(0);
  CHECK_EQ(pool.stats().reserved_bytes, 0u);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

#endif
