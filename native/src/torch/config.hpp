// The environment of libgpumem_torch.so: parsed and validated once, with messages that name the
// variable, the value and the accepted form, and turned into the core's chain_spec. Sizes are
// read by the core's one size parser (gpumem/sizes.hpp). No CUDA here.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpumem/chain_builder.hpp"

namespace gpumem::torch {

// The core's strategies that run under PyTorch (the names of the TypeScript registry): every one but
// 'host', whose memory no CUDA kernel can use. 'native' is a plug-in library (gpumem/plugin.h);
// GPUMEM_ALLOCATOR=plugin:PATH is its older spelling.
enum class strategy_kind { cuda, uvm, pool, async, expandable, pinned, tiered, native };
enum class tier_placement { automatic, device, host };
enum class uvm_advise { none, device, host };
enum class uvm_limit_mode { free_memory, none, bytes };
enum class oom_mode { raise, null };

struct config {
  strategy_kind strategy = strategy_kind::pool;
  bool uvm_prefetch = true;
  uvm_advise advise = uvm_advise::none;
  uvm_limit_mode uvm_limit = uvm_limit_mode::free_memory;
  std::uint64_t uvm_limit_bytes = 0;                       // uvm_limit == bytes
  std::optional<std::uint64_t> async_release_threshold;    // unset: keep everything
  std::uint64_t pool_max_reserved = 0;                     // 0: no cap
  oom_mode oom = oom_mode::raise;
  // GPUMEM_ALLOCATOR=native with GPUMEM_NATIVE_LIBRARY=/path/lib.so (or GPUMEM_ALLOCATOR=plugin:/path/lib.so),
  // and GPUMEM_PLUGIN_OPTIONS='k=v;k=v' (gpumem/plugin.h).
  std::string plugin_library;
  std::string plugin_options;
  // tiered: GPUMEM_TIERED_DEVICE_BUDGET, GPUMEM_TIERED_HOST_BUDGET (unset: the core's defaults: the
  // device's free memory less 1 GiB; the host's MemAvailable less 10% of MemTotal, which an explicit
  // value can only lower), GPUMEM_TIERED_PLACEMENT (where allocations go when the calling thread
  // chose nothing with gpumem_set_thread_placement).
  std::optional<std::uint64_t> tiered_device_budget;
  std::optional<std::uint64_t> tiered_host_budget;
  tier_placement tiered_placement = tier_placement::automatic;
};

// The variables parse_config reads, in the order it reads them.
extern const char* const config_variables[];
extern const std::size_t config_variable_count;

// Bytes kept free below the device's free memory when GPUMEM_UVM_LIMIT=free.
constexpr std::uint64_t uvm_free_margin = 512ull << 20;

// Reads a variable; nullptr or "" means unset. Replaceable for tests.
using env_reader = std::function<const char*(const char*)>;

// Parses the environment. Returns false and sets `error` on the first bad value.
bool parse_config(const env_reader& env, config& out, std::string& error);

// The chain the configuration asks for on `device`, for the core's chain builder
// (gpumem/chain_builder.hpp), which decides the layer order as it does for the Node addon.
// `free_bytes` is the device's free memory, read only for GPUMEM_UVM_LIMIT=free.
gpumem::chain_spec chain_spec_for(const config& c, int device, std::uint64_t free_bytes);

// A one-line description: "strategy=uvm uvm.prefetch=1 uvm.advise=none uvm.limit=free oom=raise".
std::string describe(const config& c);

const char* strategy_name(strategy_kind k);
const char* placement_name(tier_placement p);

// A configuration given as text rather than by the environment: lines "NAME=value" with the
// variables' names (gpumem_instance_create). Returns false and sets `error` for a line without '=',
// a name parse_config does not read, or a name given twice; `out` then maps each name to its value.
bool parse_spec(const std::string& spec, std::vector<std::pair<std::string, std::string>>& out, std::string& error);

}  // namespace gpumem::torch
