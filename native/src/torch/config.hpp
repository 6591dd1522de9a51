// The environment of libgpumem_torch.so: parsed and validated once, with messages that name the
// variable, the value and the accepted form, and turned into the core's chain_spec. Sizes are
// read by the core's one size parser (gpumem/sizes.hpp). No CUDA here.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "gpumem/chain_builder.hpp"

namespace gpumem::torch {

enum class strategy_kind { cuda, uvm, pool, async, plugin, expandable };
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
  // GPUMEM_ALLOCATOR=plugin:/path/lib.so and GPUMEM_PLUGIN_OPTIONS='k=v;k=v' (gpumem/plugin.h).
  std::string plugin_library;
  std::string plugin_options;
};

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

}  // namespace gpumem::torch
