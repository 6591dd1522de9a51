#include "gpumem/uvm_resource.hpp"

#include "../cuda_check.hpp"
#include "gpumem/prefetch_adaptor.hpp"
#include "gpumem/strategy_options.hpp"

namespace gpumem {

namespace {

// The options of strategy 'uvm' in a chain_spec (its descriptor's options_type).
uvm_spec& own(chain_spec& spec) { return spec.options<uvm_spec>(); }
const uvm_spec& own(const chain_spec& spec) { return spec.options<uvm_spec>(); }

}  // namespace

#ifdef GPUMEM_WITH_CUDA

namespace {
cudaMemLocation advise_location(placement_choice target, int device) {
  return target == placement_choice::host ? detail::host_location() : detail::device_location(device);
}
}  // namespace

uvm_resource::uvm_resource(int device, managed_options options) : device_(device), options_(options) {
  detail::device_scope scope(device);
  int managed = 0;
  detail::check_cuda(detail::cu::DeviceGetAttribute(&managed, cudaDevAttrManagedMemory, device), "cudaDeviceGetAttribute");
  if (!managed) throw invalid_state("uvm: device " + std::to_string(device) + " does not support managed memory");
}

uvm_resource::~uvm_resource() {
  for (auto& [ptr, reserved] : table_.take_all()) detail::cu::Free(ptr);
}

void* uvm_resource::do_allocate(std::size_t bytes, stream_handle) {
  detail::device_scope scope(device_);
  void* ptr = nullptr;
  CUresult status = detail::cu::MallocManaged(&ptr, bytes, cudaMemAttachGlobal);
  if (detail::is_out_of_memory(status)) {
    table_.count_oom();
    throw out_of_memory("uvm: cudaMallocManaged of " + format_bytes(bytes) + " failed: out of memory", bytes,
                        table_.stats());
  }
  detail::check_cuda(status, "cudaMallocManaged");
  try {
    if (options_.preferred_location != placement_choice::automatic) {
      detail::check_cuda(detail::cu::MemAdvise(ptr, bytes, cudaMemAdviseSetPreferredLocation,
                                       advise_location(options_.preferred_location, device_)),
                         "cudaMemAdvise(SetPreferredLocation)");
    }
    if (options_.accessed_by != placement_choice::automatic) {
      detail::check_cuda(
          detail::cu::MemAdvise(ptr, bytes, cudaMemAdviseSetAccessedBy, advise_location(options_.accessed_by, device_)),
          "cudaMemAdvise(SetAccessedBy)");
    }
    if (options_.read_mostly) {
      detail::check_cuda(detail::cu::MemAdvise(ptr, bytes, cudaMemAdviseSetReadMostly, detail::device_location(device_)),
                         "cudaMemAdvise(SetReadMostly)");
    }
  } catch (...) {
    detail::cu::Free(ptr);
    throw;
  }
  table_.add(ptr, bytes, bytes);
  return ptr;
}

void uvm_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle) {
  table_.remove(ptr, bytes);
  detail::device_scope scope(device_);
  (void)detail::cu::Free(ptr);
}

bool uvm_resource::do_prefetch(void* ptr, std::size_t bytes, placement to, stream_handle stream) {
  std::size_t size = table_.size_of(ptr);
  if (size == 0) throw_unknown_pointer(ptr);
  if (bytes > size) throw_size_mismatch(ptr, bytes, size);
  detail::device_scope scope(device_);
  cudaMemLocation where = to == placement::device ? detail::device_location(device_) : detail::host_location();
  detail::check_cuda(detail::cu::MemPrefetchAsync(ptr, bytes, where, 0, static_cast<cudaStream_t>(stream)),
                     "cudaMemPrefetchAsync");
  return true;
}

#else

uvm_resource::uvm_resource(int device, managed_options options) : device_(device), options_(options) {
  throw invalid_state("uvm: gpumem was built without CUDA");
}
uvm_resource::~uvm_resource() = default;
void* uvm_resource::do_allocate(std::size_t, stream_handle) { throw invalid_state("uvm: built without CUDA"); }
void uvm_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle) { table_.remove(ptr, bytes); }
bool uvm_resource::do_prefetch(void*, std::size_t, placement, stream_handle) { return false; }

#endif

namespace {

// advise: one setting for both hints, the preferred location; accessed by the device unless none.
void accessed_by_follows(chain_spec& spec) {
  managed_options& a = own(spec).advice;
  a.accessed_by = a.preferred_location == placement_choice::automatic ? placement_choice::automatic : placement_choice::device;
}

}  // namespace

// 'uvm': managed memory, with a prefetch adaptor over it when prefetchOnAllocate is on.
const strategy_descriptor& uvm_strategy() {
  static const strategy_descriptor descriptor = [] {
    strategy_descriptor d;
    d.name = "uvm";
    d.driver_needs = {{"cuMemAllocManaged", 6000}, {"cuMemAdvise", 8000}, {"cuMemPrefetchAsync", 8000}};
    d.description = "cudaMallocManaged (unified memory) with prefetch-on-allocate and cudaMemAdvise hints";
    d.options_type = &typeid(uvm_spec);
    d.layer = strategy_layer::adaptor;
    d.wraps = "managed memory (cudaMallocManaged): prefetch_adaptor moves each allocation to the device";
    d.flags.requires_cuda = true;
    d.flags.managed_memory = true;
    d.flags.peer_access = true;
    // Managed memory can outgrow the device: the PyTorch library caps it at the free memory by default.
    d.front_limit = {"GPUMEM_UVM_LIMIT", "uvm.limit"};
    using A = managed_options;
    constexpr auto device = placement_choice::device, host = placement_choice::host, none = placement_choice::automatic;
    d.options = {
        boolean_option<&uvm_spec::prefetch_on_allocate>("prefetchOnAllocate", "prefetch each allocation to the device when it is made")
            .env("GPUMEM_UVM_PREFETCH", "uvm.prefetch"),
        choice_option<&uvm_spec::advice, &A::preferred_location>(
            "advise", "cudaMemAdvise: preferred location 'device' or 'host', accessed by the device (none: no hints)",
            {{"none", none}, {"device", device}, {"host", host}})
            .and_then(accessed_by_follows).env_only().env("GPUMEM_UVM_ADVISE", "uvm.advise"),
        choice_option<&uvm_spec::advice, &A::preferred_location>("preferredLocation", "cudaMemAdviseSetPreferredLocation for every allocation",
                                                                 {{"device", device}, {"host", host}, {"none", none}}).js_only(),
        choice_option<&uvm_spec::advice, &A::accessed_by>("accessedBy", "cudaMemAdviseSetAccessedBy for every allocation",
                                                          {{"device", device}, {"host", host}, {"none", none}}).js_only(),
        boolean_option<&uvm_spec::advice, &A::read_mostly>("readMostly", "cudaMemAdviseSetReadMostly for every allocation").js_only(),
    };
    d.leaf_name = [](const chain_spec&) { return "managed"; };
    d.make_leaf = [](const chain_spec& spec, chain_build&) -> std::unique_ptr<memory_resource> {
      return std::make_unique<uvm_resource>(spec.device, own(spec).advice);
    };
    d.layer_name = [](const chain_spec& spec) -> const char* {
      return own(spec).prefetch_on_allocate ? "prefetch" : nullptr;
    };
    d.make_layer = [](const chain_spec&, chain_build& build) -> std::unique_ptr<memory_resource> {
      return std::make_unique<prefetch_adaptor>(build.chain.top());
    };
    return d;
  }();
  return descriptor;
}

}  // namespace gpumem
