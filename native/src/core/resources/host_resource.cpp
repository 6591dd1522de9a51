#include "gpumem/host_resource.hpp"

#include <cstdlib>
#include <limits>

#include "gpumem/stream_ordering.hpp"
#include "gpumem/strategy_registry.hpp"

namespace gpumem {

host_resource::~host_resource() {
  for (auto& [ptr, reserved] : table_.take_all()) std::free(ptr);
}

void* host_resource::do_allocate(std::size_t bytes, stream_handle) {
  const std::size_t max = std::numeric_limits<std::size_t>::max() - alignment;
  void* ptr = nullptr;
  std::size_t rounded = 0;
  if (bytes <= max) {
    rounded = (bytes + alignment - 1) / alignment * alignment;
    ptr = std::aligned_alloc(alignment, rounded);
  }
  if (ptr == nullptr) {
    table_.count_oom();
    throw out_of_memory("host_resource: out of host memory allocating " + format_bytes(bytes), bytes, table_.stats());
  }
  table_.add(ptr, bytes, rounded);
  return ptr;
}

void host_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle) {
  table_.remove(ptr, bytes);
  synchronize_host_streams();  // as cudaFree: work still queued on a host stream may use ptr
  std::free(ptr);
}

// 'host': plain host memory, the leaf alone.
const strategy_descriptor& host_strategy() {
  static const strategy_descriptor descriptor = [] {
    strategy_descriptor d;
    d.name = "host";
    d.description = "plain host memory, 256-byte aligned (runs without a GPU)";
    d.flags.host_memory = true;
    d.flags.kernel_memory = false;
    d.leaf_name = [](const chain_spec&) { return "host"; };
    d.make_leaf = [](const chain_spec&, chain_build&) -> std::unique_ptr<memory_resource> {
      return std::make_unique<host_resource>();
    };
    d.no_peer_access = [](const chain_spec&) { return std::string("'host' memory is plain host memory"); };
    return d;
  }();
  return descriptor;
}

}  // namespace gpumem
