#include "gpumem/async_resource.hpp"

#include <limits>

#include "../cuda_check.hpp"
#include "gpumem/strategy_options.hpp"

namespace gpumem {

namespace {

// The options of strategy 'async' in a chain_spec (its descriptor's options_type).
const async_spec& own(const chain_spec& spec) { return spec.options<async_spec>(); }

}  // namespace

#ifdef GPUMEM_WITH_CUDA

namespace {
cudaMemPool_t as_pool(void* p) { return static_cast<cudaMemPool_t>(p); }
cudaStream_t as_stream(stream_handle s) { return static_cast<cudaStream_t>(s); }

std::uint64_t pool_attribute(void* pool, cudaMemPoolAttr attr) {
  std::uint64_t value = 0;
  detail::check_cuda(detail::cu::MemPoolGetAttribute(as_pool(pool), attr, &value), "cudaMemPoolGetAttribute");
  return value;
}
}  // namespace

async_resource::async_resource(int device, async_spec options) : device_(device), options_(options) {
  detail::device_scope scope(device);
  int supported = 0;
  detail::check_cuda(detail::cu::DeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device),
                     "cudaDeviceGetAttribute");
  if (!supported) throw invalid_state("async: device " + std::to_string(device) + " does not support memory pools");
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location = detail::device_location(device);
  cudaMemPool_t pool = nullptr;
  detail::check_cuda(detail::cu::MemPoolCreate(&pool, &props), "cudaMemPoolCreate");
  std::uint64_t threshold = options.release_threshold;
  CUresult status = detail::cu::MemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
  if (status != CUDA_SUCCESS) {
    detail::cu::MemPoolDestroy(pool);
    detail::check_cuda(status, "cudaMemPoolSetAttribute(ReleaseThreshold)");
  }
  if (!options.peer_access.empty()) {
    std::vector<cudaMemAccessDesc> access(options.peer_access.size());
    for (std::size_t i = 0; i < access.size(); ++i) {
      access[i].location = detail::device_location(options.peer_access[i]);
      access[i].flags = cudaMemAccessFlagsProtReadWrite;
    }
    status = detail::cu::MemPoolSetAccess(pool, access.data(), access.size());
    if (status != CUDA_SUCCESS) {
      detail::cu::MemPoolDestroy(pool);
      detail::check_cuda(status, "cudaMemPoolSetAccess(peerAccess)");
    }
  }
  pool_ = pool;
}

async_resource::~async_resource() {
  detail::device_scope scope(device_);
  for (auto& [ptr, reserved] : table_.take_all()) detail::cu::FreeAsync(ptr, nullptr);
  detail::cu::DeviceSynchronize();
  detail::cu::MemPoolDestroy(as_pool(pool_));
}

void* async_resource::do_allocate(std::size_t bytes, stream_handle stream) {
  void* ptr = nullptr;
  CUresult status = detail::cu::MallocFromPoolAsync(&ptr, bytes, as_pool(pool_), as_stream(stream));
  if (detail::is_out_of_memory(status)) {
    table_.count_oom();
    throw out_of_memory("async: cudaMallocFromPoolAsync of " + format_bytes(bytes) + " failed: out of device memory",
                        bytes, stats());
  }
  detail::check_cuda(status, "cudaMallocFromPoolAsync");
  table_.add(ptr, bytes, 0);  // reserved bytes come from the pool's attributes
  return ptr;
}

void async_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
  table_.remove(ptr, bytes);
  std::vector<stream_handle> users;
  {
    std::lock_guard<std::mutex> lock(recorded_mutex_);
    auto it = recorded_streams_.find(ptr);
    if (it != recorded_streams_.end()) {
      users = std::move(it->second);
      recorded_streams_.erase(it);
    }
  }
  // Work recorded on other streams must finish before the pool may hand the memory out again:
  // the freeing stream waits for each of them, then frees in its own order.
  for (stream_handle user : users) {
    cudaEvent_t event = nullptr;
    if (detail::cu::EventCreateWithFlags(&event, cudaEventDisableTiming) != CUDA_SUCCESS) {
      detail::cu::StreamSynchronize(as_stream(user));
      continue;
    }
    detail::cu::EventRecord(event, as_stream(user));
    detail::cu::StreamWaitEvent(as_stream(stream), event, 0);
    detail::cu::EventDestroy(event);  // released once it completes
  }
  (void)detail::cu::FreeAsync(ptr, as_stream(stream));
}

void async_resource::do_record_stream(void* ptr, stream_handle stream) {
  if (table_.size_of(ptr) == 0) throw_unknown_pointer(ptr);
  std::lock_guard<std::mutex> lock(recorded_mutex_);
  auto& users = recorded_streams_[ptr];
  for (stream_handle s : users) {
    if (s == stream) return;
  }
  users.push_back(stream);
}

resource_stats async_resource::do_stats() const {
  resource_stats s = table_.stats();
  s.reserved_bytes = pool_attribute(pool_, cudaMemPoolAttrReservedMemCurrent);
  s.peak_reserved_bytes = pool_attribute(pool_, cudaMemPoolAttrReservedMemHigh);
  s.segment_count = 0;
  s.upstream_alloc_count = s.alloc_count;  // every cudaMallocAsync is a driver call
  s.upstream_free_count = s.free_count;
  return s;
}

void async_resource::do_reset_peak() {
  table_.reset_peak();
  std::uint64_t zero = 0;  // setting a high-water mark to 0 resets it to the current value
  detail::check_cuda(detail::cu::MemPoolSetAttribute(as_pool(pool_), cudaMemPoolAttrReservedMemHigh, &zero),
                     "cudaMemPoolSetAttribute(ReservedMemHigh)");
  detail::check_cuda(detail::cu::MemPoolSetAttribute(as_pool(pool_), cudaMemPoolAttrUsedMemHigh, &zero),
                     "cudaMemPoolSetAttribute(UsedMemHigh)");
}

void async_resource::do_trim(std::size_t bytes_to_keep) {
  detail::device_scope scope(device_);
  // Frees queued on streams only reach the pool once they have run.
  detail::check_cuda(detail::cu::DeviceSynchronize(), "cudaDeviceSynchronize");
  detail::check_cuda(detail::cu::MemPoolTrimTo(as_pool(pool_), bytes_to_keep), "cudaMemPoolTrimTo");
}

#else

async_resource::async_resource(int device, async_spec options) : device_(device), options_(options) {
  throw invalid_state("async: gpumem was built without CUDA");
}
async_resource::~async_resource() = default;
void* async_resource::do_allocate(std::size_t, stream_handle) { throw invalid_state("async: built without CUDA"); }
void async_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle) { table_.remove(ptr, bytes); }
void async_resource::do_record_stream(void*, stream_handle) {}
resource_stats async_resource::do_stats() const { return table_.stats(); }
void async_resource::do_reset_peak() { table_.reset_peak(); }
void async_resource::do_trim(std::size_t) {}

#endif

// 'async': cudaMallocAsync on an owned pool, the leaf alone.
const strategy_descriptor& async_strategy() {
  static const strategy_descriptor descriptor = [] {
    strategy_descriptor d;
    d.name = "async";
    d.driver_needs = {{"cuMemPoolCreate", 11020}, {"cuMemAllocFromPoolAsync", 11020}};
    d.description = "cudaMallocAsync on an owned cudaMemPool_t with a release threshold";
    d.options_type = &typeid(async_spec);
    d.flags.requires_cuda = true;
    d.flags.peer_access = true;
    d.no_address_only = "cudaMallocAsync's pool is the driver's, whose placement has no twin to replay it on";
    d.options = {bytes_option<&async_spec::release_threshold>(
                     "releaseThreshold", "idle bytes the pool keeps at a synchronisation point (unset: keep everything)")
                     .unset_at(std::numeric_limits<std::uint64_t>::max())
                     .env("GPUMEM_ASYNC_RELEASE_THRESHOLD", "async.release_threshold").unset_text("keep-all")};
    d.leaf_name = [](const chain_spec&) { return "async"; };
    d.make_leaf = [](const chain_spec& spec, chain_build&) -> std::unique_ptr<memory_resource> {
      async_spec o = own(spec);
      o.peer_access = spec.peer_access;
      return std::make_unique<async_resource>(spec.device, o);
    };
    return d;
  }();
  return descriptor;
}

}  // namespace gpumem
