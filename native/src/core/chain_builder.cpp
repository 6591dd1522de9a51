#include "gpumem/chain_builder.hpp"

#include <string>

#include "gpumem/cuda_resource.hpp"
#include "gpumem/device.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/limiting_adaptor.hpp"
#include "gpumem/peer_access.hpp"
#include "gpumem/pinned_host_resource.hpp"
#include "gpumem/physical_memory.hpp"
#include "gpumem/prefetch_adaptor.hpp"
#include "gpumem/tier_memory.hpp"

namespace gpumem {
namespace {

enum class layer_kind { host, cuda, managed, async, plugin, vmm, mmap, pinned, tiered, fault, limit, pool, expandable, prefetch, track };

const char* layer_name(layer_kind k) {
  switch (k) {
    case layer_kind::host: return "host";
    case layer_kind::cuda: return "cuda";
    case layer_kind::managed: return "managed";
    case layer_kind::async: return "async";
    case layer_kind::plugin: return "plugin";
    case layer_kind::vmm: return "vmm";
    case layer_kind::mmap: return "mmap";
    case layer_kind::pinned: return "pinned";
    case layer_kind::tiered: return "tiered";
    case layer_kind::expandable: return "expandable";
    case layer_kind::fault: return "fault";
    case layer_kind::limit: return "limit";
    case layer_kind::pool: return "pool";
    case layer_kind::prefetch: return "prefetch";
    case layer_kind::track: return "track";
  }
  return "host";
}

[[noreturn]] void reject(const char* field, const std::string& expected, const std::string& received) {
  throw invalid_argument(invalid_argument::kind::range, field,
                         "Expected " + expected + " for " + field + " but received " + received);
}

void positive(const std::optional<std::uint64_t>& v, const char* field) {
  if (v && *v == 0) reject(field, "positive integer", "0");
}

// The layer order, bottom first: the one place it is decided (see chain_builder.hpp).
std::vector<layer_kind> plan(const chain_spec& spec) {
  std::vector<layer_kind> layers;
  switch (spec.strategy) {
    case strategy_kind::host: layers.push_back(layer_kind::host); break;
    case strategy_kind::cuda: layers.push_back(layer_kind::cuda); break;
    case strategy_kind::uvm: layers.push_back(layer_kind::managed); break;
    case strategy_kind::async: layers.push_back(layer_kind::async); break;
    case strategy_kind::native: layers.push_back(layer_kind::plugin); break;
    case strategy_kind::expandable:
      layers.push_back(spec.expandable.backing == expandable_backing::device ? layer_kind::vmm : layer_kind::mmap);
      break;
    case strategy_kind::pool:
      layers.push_back(spec.pool.upstream == pool_upstream::cuda ? layer_kind::cuda : layer_kind::host);
      break;
    case strategy_kind::pinned:
      layers.push_back(spec.pinned.upstream == pinned_upstream::pinned ? layer_kind::pinned : layer_kind::host);
      break;
    case strategy_kind::tiered: layers.push_back(layer_kind::tiered); break;
  }
  if (spec.fault_injection) layers.push_back(layer_kind::fault);
  if (spec.limit_bytes) layers.push_back(layer_kind::limit);
  if (spec.strategy == strategy_kind::pool || spec.strategy == strategy_kind::pinned) layers.push_back(layer_kind::pool);
  if (spec.strategy == strategy_kind::expandable) layers.push_back(layer_kind::expandable);
  if (spec.strategy == strategy_kind::uvm && spec.uvm.prefetch_on_allocate) layers.push_back(layer_kind::prefetch);
  if (spec.tracking_capacity) layers.push_back(layer_kind::track);
  return layers;
}

fault_options to_fault_options(const fault_spec& f) {
  fault_options o;
  if (f.fail_every) o.fail_every = *f.fail_every;
  if (f.fail_after_bytes) o.fail_after_bytes = *f.fail_after_bytes;
  return o;
}

// Why `spec`'s memory cannot take the peerAccess option (it is not on a CUDA device); empty when it can.
std::string no_peer_access(const chain_spec& spec) {
  switch (spec.strategy) {
    case strategy_kind::host: return "'host' memory is plain host memory";
    case strategy_kind::native: return "a plug-in's memory is its own";
    case strategy_kind::pool:
      return spec.pool.upstream == pool_upstream::host ? "'pool' over upstream 'host' holds host memory" : "";
    case strategy_kind::pinned:
      return spec.pinned.upstream == pinned_upstream::host ? "'pinned' over upstream 'host' holds plain host memory" : "";
    case strategy_kind::expandable:
      return spec.expandable.backing == expandable_backing::host ? "'expandable' over the host twin holds host memory" : "";
    case strategy_kind::tiered:
      if (spec.tiered.backing == tiered_backing::host ||
          (spec.tiered.backing == tiered_backing::automatic && device_count() == 0)) {
        return "'tiered' over the host twin holds host memory";
      }
      return "";
    case strategy_kind::cuda:
    case strategy_kind::uvm:
    case strategy_kind::async: return "";
  }
  return "";
}

// The pool options of a 'pool' or 'pinned' chain. Over the pinned leaf, max_reserved_bytes is the
// leaf's cap on pinned bytes (see pinned_spec) rather than the pool's, so that a request past it fails
// saying it would pin more than the host has available; the pool still releases its cached segments
// and retries once before it fails.
pool_options pool_options_of(const chain_spec& spec) {
  if (spec.strategy != strategy_kind::pinned) return spec.pool.options;
  pool_options o = spec.pinned.options;
  if (spec.pinned.upstream == pinned_upstream::pinned) o.max_reserved_bytes = 0;
  return o;
}

// While a chain is built: the physical memory of an expandable strategy, until its layer takes it.
struct build_state {
  std::unique_ptr<physical_memory> physical;
};

std::unique_ptr<memory_resource> make_expandable(const chain_spec& spec, build_state& state) {
  expandable_options o = spec.expandable.options;
  if (o.capacity_bytes == 0 && spec.limit_bytes) o.capacity_bytes = *spec.limit_bytes;  // the simulated device
  return std::make_unique<expandable_resource>(std::move(state.physical), o);
}

// The tiered leaf over CUDA VMM or the host twin ('automatic': VMM when a GPU is present).
std::unique_ptr<memory_resource> make_tiered(const chain_spec& spec, resource_chain& chain) {
  const tiered_backing backing = spec.tiered.backing;
  const bool on_device = backing == tiered_backing::device || (backing == tiered_backing::automatic && device_count() > 0);
  auto r = std::make_unique<tiered_resource>(
      on_device ? make_device_tier_memory(spec.device, spec.peer_access) : make_host_tier_memory(), spec.tiered.options);
  chain.tiered = r.get();
  return r;
}

// A layer of the chain, or nullptr where the layer wraps the physical memory (expandable's leaf,
// fault and limit: see chain_builder.hpp).
std::unique_ptr<memory_resource> make_layer(layer_kind kind, const chain_spec& spec, resource_chain& chain,
                                            build_state& state) {
  if (state.physical && (kind == layer_kind::fault || kind == layer_kind::limit)) {
    state.physical = kind == layer_kind::fault
                         ? make_fault_injecting_physical_memory(std::move(state.physical),
                                                                to_fault_options(*spec.fault_injection))
                         : make_limited_physical_memory(std::move(state.physical), *spec.limit_bytes);
    return nullptr;
  }
  switch (kind) {
    case layer_kind::vmm:
      state.physical = make_device_physical_memory(spec.device, spec.expandable.granule_bytes, spec.peer_access);
      return nullptr;
    case layer_kind::mmap:
      state.physical = make_host_physical_memory(spec.expandable.granule_bytes);
      return nullptr;
    case layer_kind::expandable: return make_expandable(spec, state);
    case layer_kind::tiered: return make_tiered(spec, chain);
    case layer_kind::host: return std::make_unique<host_resource>();
    case layer_kind::cuda: return std::make_unique<cuda_resource>(spec.device, spec.peer_access);
    case layer_kind::pinned:
      return std::make_unique<pinned_host_resource>(spec.device, pinned_host_options{spec.pinned.options.max_reserved_bytes});
    case layer_kind::managed: return std::make_unique<managed_resource>(spec.device, spec.uvm.advice);
    case layer_kind::async: {
      async_options o = spec.async;
      o.peer_access = spec.peer_access;
      return std::make_unique<async_resource>(spec.device, o);
    }
    case layer_kind::plugin:
      return std::make_unique<plugin_resource>(plugin_options{spec.native.library, spec.native.options, spec.device});
    case layer_kind::fault:
      return std::make_unique<fault_injecting_adaptor>(chain.top(), to_fault_options(*spec.fault_injection));
    case layer_kind::limit: return std::make_unique<limiting_adaptor>(chain.top(), *spec.limit_bytes);
    case layer_kind::pool: return std::make_unique<pool_resource>(chain.top(), pool_options_of(spec));
    case layer_kind::prefetch: return std::make_unique<prefetch_adaptor>(chain.top());
    case layer_kind::track: {
      auto t = std::make_unique<tracking_adaptor>(chain.top(), *spec.tracking_capacity);
      chain.tracker = t.get();
      return t;
    }
  }
  throw invalid_state("unknown layer");
}

}  // namespace

resource_chain::~resource_chain() {
  while (!layers.empty()) layers.pop_back();
}

strategy_kind parse_strategy(std::string_view name) {
  if (name == "host") return strategy_kind::host;
  if (name == "cuda") return strategy_kind::cuda;
  if (name == "uvm") return strategy_kind::uvm;
  if (name == "pool") return strategy_kind::pool;
  if (name == "async") return strategy_kind::async;
  if (name == "native") return strategy_kind::native;
  if (name == "expandable") return strategy_kind::expandable;
  if (name == "pinned") return strategy_kind::pinned;
  if (name == "tiered") return strategy_kind::tiered;
  throw invalid_argument(invalid_argument::kind::type, "strategy",
                         "Expected one of 'host', 'cuda', 'uvm', 'pool', 'async', 'native', 'expandable', 'pinned', 'tiered' for strategy but received '" +
                             std::string(name) + "'");
}

const char* strategy_name(strategy_kind kind) {
  switch (kind) {
    case strategy_kind::host: return "host";
    case strategy_kind::cuda: return "cuda";
    case strategy_kind::uvm: return "uvm";
    case strategy_kind::pool: return "pool";
    case strategy_kind::async: return "async";
    case strategy_kind::native: return "native";
    case strategy_kind::expandable: return "expandable";
    case strategy_kind::pinned: return "pinned";
    case strategy_kind::tiered: return "tiered";
  }
  return "host";
}

void validate(const chain_spec& spec) {
  if (spec.strategy == strategy_kind::native) {
    if (spec.device < -1) reject("device", "non-negative integer or -1 (host memory)", std::to_string(spec.device));
    if (spec.native.library.empty()) reject("library", "a non-empty path", "''");
  } else if (spec.device < 0) {
    reject("device", "non-negative integer", std::to_string(spec.device));
  }
  positive(spec.limit_bytes, "limitBytes");
  positive(spec.tracking_capacity, "trackingCapacity");
  if (spec.fault_injection) {
    const fault_spec& f = *spec.fault_injection;
    if (!f.fail_every && !f.fail_after_bytes) {
      throw invalid_argument(invalid_argument::kind::type, "faultInjection",
                             "Expected failEvery and/or failAfterBytes in faultInjection but received neither");
    }
    positive(f.fail_every, "faultInjection.failEvery");
  }
  if (spec.strategy == strategy_kind::pool || spec.strategy == strategy_kind::pinned) {
    const pool_options& o = spec.strategy == strategy_kind::pool ? spec.pool.options : spec.pinned.options;
    positive(o.small_request_limit, "smallRequestLimit");
    positive(o.small_segment_bytes, "smallSegmentBytes");
    positive(o.large_segment_rounding, "largeSegmentRounding");
  }
  if (spec.strategy == strategy_kind::expandable) {
    const expandable_options& o = spec.expandable.options;
    if (!(o.gc_threshold >= 0 && o.gc_threshold <= 1)) {
      reject("gcThreshold", "a fraction in (0, 1] (0: off)", std::to_string(o.gc_threshold));
    }
  }
  if (!spec.peer_access.empty()) {
    const std::string why = no_peer_access(spec);
    if (!why.empty()) {
      throw invalid_argument(invalid_argument::kind::type, "peerAccess",
                             "Expected peerAccess only for memory on a CUDA device but " + why);
    }
    check_peer_access(spec.device, spec.peer_access);
  }
}

std::vector<std::string> chain_layers(const chain_spec& spec) {
  std::vector<std::string> names;
  for (layer_kind k : plan(spec)) names.emplace_back(layer_name(k));
  return names;
}

resource_chain build_chain(const chain_spec& spec) {
  validate(spec);
  resource_chain chain;  // on a throw, its destructor undoes the layers built so far
  build_state state;
  for (layer_kind k : plan(spec)) {
    if (auto layer = make_layer(k, spec, chain, state)) chain.layers.push_back(std::move(layer));
  }
  return chain;
}

}  // namespace gpumem
