// The one place that turns a strategy and its options into a chain of resources. The Node addon
// (from the JavaScript spec) and libgpumem_torch.so (from the environment) both fill a chain_spec
// and call build_chain, so a strategy is the same chain wherever it runs.
//
// Each strategy's leaf, its own layer, its options and its checks come from its descriptor
// (gpumem/strategy_registry.hpp, defined in the resource's own .cpp); the builder adds the layers any
// strategy may have and decides their order. Layer order, bottom to top (each optional layer only
// when asked for):
//   leaf            the strategy's driver calls (its descriptor's make_leaf), e.g. host, cuda
//                   (or, with address_only, addresses backed by nothing: "addresses"),
//                   (cudaMalloc), managed (uvm_resource), async, tiered, pinned
//                   (cudaHostAlloc, strategy 'pinned'), or a plug-in library's (plugin_resource,
//                   strategy 'plugin');
//   fault           fault_injecting_adaptor, right over the leaf: fails what the driver is asked;
//   limit           limiting_adaptor: caps the bytes taken from the (possibly failing) leaf;
//   strategy layer  the descriptor's make_layer, e.g. pool_resource ('pool', 'pinned') or prefetch_adaptor
//                   ('uvm' with prefetch on allocate), over the limited leaf, so that the limit caps
//                   what the strategy reserves;
//   tracking        tracking_adaptor on top: records every call as the user made it.
//
// 'expandable' maps granules into virtual ranges rather than taking allocations from an upstream,
// so nothing can sit under it as a memory_resource. Its leaf is a vmm (gpumem/vmm.hpp: CUDA VMM, or
// its host implementation over mmap'd memfds), and fault and limit wrap that in the same order: limitBytes
// caps the bytes of the physical allocations created, checked on every create (a smaller GPU), and
// faultInjection fails creates (failEvery counts them, failAfterBytes is a budget of created
// bytes); each run the strategy maps is one create. A failure is an out_of_memory from a create, so
// it meets the strategy's release-and-retry exactly as a real one would. chain_layers
// names them in that order: {"vmm" or "mmap", "fault", "limit", "expandable", "track"}.
#pragma once
#include <any>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "gpumem/errors.hpp"
#include "gpumem/memory_resource.hpp"
#include "gpumem/tracking_adaptor.hpp"

namespace gpumem {

class placeable;
class sleepable;

// At least one of the two must be set.
struct fault_spec {
  std::optional<std::uint64_t> fail_every;        // >= 1
  std::optional<std::uint64_t> fail_after_bytes;  // >= 0
};

// A strategy by its registered name and its own options, plus the layers any strategy may have.
// The type names no strategy (the comments name some as examples): each strategy's options struct (pool_spec in pool_resource.hpp,
// uvm_spec in uvm_resource.hpp, ...) is declared beside its resource, named by its descriptor
// (strategy_descriptor::options_type) and held here type-erased. C++ callers fill it through
// options<T>():
//
//   chain_spec s;
//   s.strategy = "pool";
//   s.options<pool_spec>().upstream = placement::host;
struct chain_spec {
  // A registered strategy's name, or one of its older names (GPUMEM_STRATEGIES in
  // gpumem/strategy_registry.hpp; strategies() lists them); validate() rejects any other.
  std::string strategy = "host";
  // CUDA ordinal; ignored by memory on the host ('host', a pool over host memory); a strategy with
  // the hostDevice flag takes -1 for host memory.
  int device = 0;
  // Devices that may read and write the memory (the peerAccess option), for strategies whose memory
  // is on a CUDA device: 'cuda' and 'pool' over cudaMalloc (cudaDeviceEnablePeerAccess), 'async'
  // (cudaMemPoolSetAccess), 'expandable' and 'tiered' over CUDA VMM (cuMemSetAccess); 'uvm' and
  // 'pinned' over pinned memory need nothing more (every device reaches managed and portable mapped
  // memory) but are checked the same. validate() checks the list (gpumem/peer_access.hpp).
  std::vector<int> peer_access;
  // The layers any strategy may have.
  std::optional<std::uint64_t> limit_bytes;        // >= 1
  std::optional<fault_spec> fault_injection;
  std::optional<std::uint64_t> tracking_capacity;  // >= 1
  // The leaf hands out addresses with nothing behind them (gpumem/address_only.hpp), for a strategy
  // whose descriptor has the address_only flag: a replay that takes no memory, the same on any
  // machine. validate() rejects it for any other strategy.
  bool address_only = false;

  // The strategy's own options, of its descriptor's options_type. The first call makes T's defaults;
  // throws invalid_state where the spec holds another type (another strategy's options).
  template <class T>
  T& options() {
    if (!own_options_.has_value()) own_options_.emplace<T>();
    if (T* o = std::any_cast<T>(&own_options_)) return *o;
    throw invalid_state(std::string("chain_spec of strategy '") + strategy + "' holds another strategy's options");
  }
  // The options as set, or T's defaults where none are; throws invalid_state as above.
  template <class T>
  const T& options() const {
    static const T defaults{};
    if (!own_options_.has_value()) return defaults;
    if (const T* o = std::any_cast<T>(&own_options_)) return *o;
    throw invalid_state(std::string("chain_spec of strategy '") + strategy + "' holds another strategy's options");
  }
  // Whether options are held, and their type (typeid(void) where none are).
  bool has_options() const noexcept { return own_options_.has_value(); }
  const std::type_info& options_type() const noexcept { return own_options_.type(); }
  // Drops the options (before naming another strategy).
  void clear_options() noexcept { own_options_.reset(); }

 private:
  std::any own_options_;
};

// A built chain: it owns every layer; each adaptor refers to the layer under it.
struct resource_chain {
  std::vector<std::unique_ptr<memory_resource>> layers;  // bottom (the leaf) first
  tracking_adaptor* tracker = nullptr;                   // the tracking layer, when there is one
  placeable* placer = nullptr;                           // the leaf whose placement can be set, when there is one
  sleepable* sleeper = nullptr;                          // the leaf of a strategy with the sleep flag
  memory_resource& top() const { return *layers.back(); }
  resource_chain() = default;
  resource_chain(resource_chain&&) = default;
  resource_chain& operator=(resource_chain&&) = delete;
  ~resource_chain();  // top first: adaptors before their upstreams
};

// Throws invalid_argument naming the field (e.g. "strategy", "limitBytes", "faultInjection.failEvery")
// for a spec that cannot be built; nothing is allocated before the spec is checked.
void validate(const chain_spec& spec);

// Validates, then builds bottom-up. A failure (a bad spec, no CUDA, a leaf that cannot start)
// throws after undoing the layers already built.
resource_chain build_chain(const chain_spec& spec);

// The layers of the chain `spec` builds, bottom first, e.g. {"cuda", "fault", "limit", "pool",
// "track"}: the order without building anything (for tests and descriptions).
std::vector<std::string> chain_layers(const chain_spec& spec);

}  // namespace gpumem
