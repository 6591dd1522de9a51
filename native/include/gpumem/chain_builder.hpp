// The one place that turns a strategy and its options into a chain of resources. The Node addon
// (from the JavaScript spec) and libgpumem_torch.so (from the environment) both fill a chain_spec
// and call build_chain, so a strategy is the same chain wherever it runs.
//
// Each strategy's leaf, its own layer, its options and its checks come from its descriptor
// (gpumem/strategy_registry.hpp, defined in the resource's own .cpp); the builder adds the layers any
// strategy may have and decides their order. Layer order, bottom to top (each optional layer only
// when asked for):
//   leaf            the strategy's driver calls: host, cuda (cudaMalloc), managed, async, pinned
//                   (cudaHostAlloc, strategy 'pinned'), or a plug-in library's (plugin_resource,
//                   strategy 'native');
//   fault           fault_injecting_adaptor, right over the leaf: fails what the driver is asked;
//   limit           limiting_adaptor: caps the bytes taken from the (possibly failing) leaf;
//   strategy layer  pool_resource ('pool', 'pinned') or prefetch_adaptor ('uvm' with prefetch on allocate),
//                   over the limited leaf, so that the limit caps what the strategy reserves;
//   tracking        tracking_adaptor on top: records every call as the user made it.
//
// 'expandable' maps granules into virtual ranges rather than taking allocations from an upstream,
// so nothing can sit under it as a memory_resource. Its leaf is a physical_memory (CUDA VMM, or the
// host twin over mmap), and fault and limit wrap that in the same order: limitBytes caps the bytes
// mapped, checked on every run map (a smaller GPU), and faultInjection fails run maps
// (failEvery counts maps, failAfterBytes is a budget of mapped bytes). A failure is an out_of_memory
// from a map, so it meets the strategy's release-and-retry exactly as a real one would. chain_layers
// names them in that order: {"vmm" or "mmap", "fault", "limit", "expandable", "track"}.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpumem/async_resource.hpp"
#include "gpumem/expandable_resource.hpp"
#include "gpumem/fault_injecting_adaptor.hpp"
#include "gpumem/managed_resource.hpp"
#include "gpumem/memory_resource.hpp"
#include "gpumem/plugin_resource.hpp"
#include "gpumem/pool_resource.hpp"
#include "gpumem/tiered_resource.hpp"
#include "gpumem/tracking_adaptor.hpp"

namespace gpumem {

enum class strategy_kind { host, cuda, uvm, pool, async, native, expandable, pinned, tiered };

// Where a pool's segments come from.
enum class pool_upstream { cuda, host };

// Where an expandable strategy's granules come from: CUDA VMM on `device`, or the host twin (also
// chosen by device -1).
enum class expandable_backing { device, host };

struct expandable_spec {
  expandable_backing backing = expandable_backing::device;
  std::uint64_t granule_bytes = 0;  // 0: the backing's default
  expandable_options options;       // capacity_bytes 0: limitBytes when set, else the device's memory
};

struct uvm_spec {
  bool prefetch_on_allocate = true;
  managed_options advice;
};

// A strategy from a shared library (gpumem/plugin.h). Its memory is on `chain_spec::device`, or on
// the host when that is -1.
struct native_spec {
  std::string library;  // the path dlopen is given
  std::string options;  // "key=value;key=value", passed to the library as is
};

struct pool_spec {
  pool_upstream upstream = pool_upstream::cuda;
  pool_options options;
};

// Where a 'pinned' pool's segments come from: mapped pinned host memory (cudaHostAlloc, kernels
// use it in place), or the host twin (plain host memory: the same pool logic where there is no GPU).
enum class pinned_upstream { pinned, host };

// 'pinned': a pool_resource over pinned_host_resource. The pinned leaf caps what it pins (MemAvailable
// at creation less 10% of MemTotal); options.max_reserved_bytes lowers that cap and is enforced by the
// leaf, so a request past it fails saying it would pin more than the host has available. Over the
// host twin, max_reserved_bytes is the pool's own cap, as for 'pool'.
struct pinned_spec {
  pinned_upstream upstream = pinned_upstream::pinned;
  pool_options options;
};

// Where a 'tiered' strategy's tiers come from: CUDA VMM on `device` (device memory, then pinned host
// memory kernels use in place), the host twin (memfd mappings), or automatic (CUDA VMM when a GPU is
// present). Its leaf is a tiered_resource; fault, limit and tracking wrap it as memory_resources
// ({"tiered", "fault", "limit", "track"}), so limitBytes caps the bytes callers hold over both tiers.
enum class tiered_backing { device, host, automatic };

struct tiered_spec {
  tiered_backing backing = tiered_backing::automatic;
  tiered_options options;
};

// At least one of the two must be set.
struct fault_spec {
  std::optional<std::uint64_t> fail_every;        // >= 1
  std::optional<std::uint64_t> fail_after_bytes;  // >= 0
};

struct chain_spec {
  strategy_kind strategy = strategy_kind::host;
  int device = 0;  // CUDA ordinal; ignored by 'host' and by a pool over host memory; 'native': -1 is the host
  // Devices that may read and write the memory (the peerAccess option), for strategies whose memory
  // is on a CUDA device: 'cuda' and 'pool' over cudaMalloc (cudaDeviceEnablePeerAccess), 'async'
  // (cudaMemPoolSetAccess), 'expandable' and 'tiered' over CUDA VMM (cuMemSetAccess); 'uvm' and
  // 'pinned' over pinned memory need nothing more (every device reaches managed and portable mapped
  // memory) but are checked the same. validate() checks the list (gpumem/peer_access.hpp).
  std::vector<int> peer_access;
  // The strategy's own options: only the member of `strategy` is read.
  uvm_spec uvm;
  pool_spec pool;
  async_options async;
  native_spec native;
  expandable_spec expandable;
  pinned_spec pinned;
  tiered_spec tiered;
  // The layers any strategy may have.
  std::optional<std::uint64_t> limit_bytes;        // >= 1
  std::optional<fault_spec> fault_injection;
  std::optional<std::uint64_t> tracking_capacity;  // >= 1
};

// A built chain: it owns every layer; each adaptor refers to the layer under it.
struct resource_chain {
  std::vector<std::unique_ptr<memory_resource>> layers;  // bottom (the leaf) first
  tracking_adaptor* tracker = nullptr;                   // the tracking layer, when there is one
  tiered_resource* tiered = nullptr;                     // the tiered leaf (set_placement), when there is one
  memory_resource& top() const { return *layers.back(); }
  resource_chain() = default;
  resource_chain(resource_chain&&) = default;
  resource_chain& operator=(resource_chain&&) = delete;
  ~resource_chain();  // top first: adaptors before their upstreams
};

// A registered strategy's name (gpumem/strategy_registry.hpp: "host", "cuda", "uvm", "pool", "async",
// "native", "expandable", "pinned", "tiered"); throws invalid_argument (type) for anything else.
strategy_kind parse_strategy(std::string_view name);
const char* strategy_name(strategy_kind kind);

// Throws invalid_argument naming the field (e.g. "limitBytes", "faultInjection.failEvery") for a
// spec that cannot be built; nothing is allocated before the spec is checked.
void validate(const chain_spec& spec);

// Validates, then builds bottom-up. A failure (a bad spec, no CUDA, a leaf that cannot start)
// throws after undoing the layers already built.
resource_chain build_chain(const chain_spec& spec);

// The layers of the chain `spec` builds, bottom first, e.g. {"cuda", "fault", "limit", "pool",
// "track"}: the order without building anything (for tests and descriptions).
std::vector<std::string> chain_layers(const chain_spec& spec);

}  // namespace gpumem
