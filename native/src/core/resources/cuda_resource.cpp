#include "gpumem/cuda_resource.hpp"

#include "gpumem/peer_access.hpp"
#include "../cuda_check.hpp"
#include "gpumem/strategy_registry.hpp"

namespace gpumem {

#ifdef GPUMEM_WITH_CUDA

cuda_resource::cuda_resource(int device, const std::vector<int>& peers) : device_(device) {
  { detail::device_scope scope(device); }  // validates the device
  enable_peer_access(device, peers);
}

cuda_resource::~cuda_resource() {
  for (auto& [ptr, reserved] : table_.take_all()) detail::cu::Free(ptr);
}

void* cuda_resource::do_allocate(std::size_t bytes, stream_handle) {
  detail::device_scope scope(device_);
  void* ptr = nullptr;
  CUresult status = detail::cu::Malloc(&ptr, bytes);
  if (detail::is_out_of_memory(status)) {
    table_.count_oom();
    throw out_of_memory("cuda: cudaMalloc of " + format_bytes(bytes) + " failed: out of device memory", bytes,
                        table_.stats());
  }
  detail::check_cuda(status, "cudaMalloc");
  table_.add(ptr, bytes, bytes);
  return ptr;
}

void cuda_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle) {
  table_.remove(ptr, bytes);
  detail::device_scope scope(device_);
  (void)detail::cu::Free(ptr);  // the memory is gone either way; never throw here
}

#else

cuda_resource::cuda_resource(int device, const std::vector<int>&) : device_(device) {
  throw invalid_state("cuda: gpumem was built without CUDA");
}
cuda_resource::~cuda_resource() = default;
void* cuda_resource::do_allocate(std::size_t, stream_handle) { throw invalid_state("cuda: built without CUDA"); }
void cuda_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle) { table_.remove(ptr, bytes); }

#endif

// 'cuda': cudaMalloc/cudaFree, the leaf alone.
const strategy_descriptor& cuda_strategy() {
  static const strategy_descriptor descriptor = [] {
    strategy_descriptor d;
    d.name = "cuda";
    d.driver_needs = {{"cuMemAlloc", 3020}, {"cuMemFree", 3020}};
    d.description = "cudaMalloc/cudaFree: every call goes to the driver (the baseline)";
    d.flags.requires_cuda = true;
    d.flags.peer_access = true;
    d.leaf_name = [](const chain_spec&) { return "cuda"; };
    d.make_leaf = [](const chain_spec& spec, chain_build&) -> std::unique_ptr<memory_resource> {
      return std::make_unique<cuda_resource>(spec.device, spec.peer_access);
    };
    return d;
  }();
  return descriptor;
}

}  // namespace gpumem
