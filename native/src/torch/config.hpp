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
#include "gpumem/strategy_registry.hpp"

namespace gpumem::torch {

// A strategy's front_limit variable (its descriptor's; GPUMEM_UVM_LIMIT for uvm): a limit layer under it.
enum class limit_mode { free_memory, none, bytes };
enum class oom_mode { raise, null };

// GPUMEM_OOM_WINDOW and GPUMEM_OOM_REPLAY_MS: their defaults and the most they take.
constexpr std::uint64_t default_oom_window = 65536;
constexpr std::uint64_t default_oom_replay_ms = 250;
constexpr std::uint64_t max_oom_window = std::uint64_t{1} << 20;
constexpr std::uint64_t max_oom_replay_ms = 60000;

// GPUMEM_ALLOCATOR names a strategy of the core's registry (gpumem/strategy_registry.hpp): any whose
// memory CUDA kernels can use (the kernelMemory flag; 'host' is the one without). Each strategy
// option with a variable (GPUMEM_POOL_MAX_RESERVED, ...) is read through its descriptor.
// Deprecated spellings, read with a warning until they are removed: a strategy's older name
// (GPUMEM_ALLOCATOR=native for plugin) and its variables under that name (GPUMEM_NATIVE_LIBRARY for
// GPUMEM_PLUGIN_LIBRARY), and GPUMEM_ALLOCATOR=plugin:PATH for plugin with GPUMEM_PLUGIN_LIBRARY=PATH.
struct config {
  const gpumem::strategy_descriptor* strategy = nullptr;  // never null once parsed ('expandable' by default)
  gpumem::chain_spec spec;  // the strategy and its options; chain_spec_for adds the device and the limit
  // The strategy's front_limit (only where its descriptor declares one).
  limit_mode front_limit = limit_mode::free_memory;
  std::uint64_t front_limit_bytes = 0;  // front_limit == bytes
  oom_mode oom = oom_mode::raise;
  // The out-of-memory report (oom_report.hpp): events kept per device (GPUMEM_OOM_WINDOW, 0: the
  // ring is off) and the replay's time bound in milliseconds (GPUMEM_OOM_REPLAY_MS, 0: no replay).
  std::uint64_t oom_window = default_oom_window;
  std::uint64_t oom_replay_ms = default_oom_replay_ms;
  std::string warning;  // deprecated spellings were read: what to write instead, a line each
};

// The variables parse_config reads, in the order it reads them.
// GPUMEM_ALLOCATOR, the strategies' variables (in the registry's order), their deprecated spellings,
// the strategies' front_limit variables, GPUMEM_OOM, GPUMEM_OOM_WINDOW, GPUMEM_OOM_REPLAY_MS.
const std::vector<std::string>& config_variables();

// Bytes kept free below the device's free memory when a front_limit variable says 'free'.
constexpr std::uint64_t front_limit_free_margin = 512ull << 20;

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


// A configuration given as text rather than by the environment: lines "NAME=value" with the
// variables' names (gpumem_instance_create). Returns false and sets `error` for a line without '=',
// a name parse_config does not read, a name given twice, or a NUL character anywhere (parse_config
// reads the values as C strings, which a NUL would cut short: '8GiB\0junk' must not pass as 8 GiB);
// `out` then maps each name to its value.
bool parse_spec(const std::string& spec, std::vector<std::pair<std::string, std::string>>& out, std::string& error);

}  // namespace gpumem::torch
