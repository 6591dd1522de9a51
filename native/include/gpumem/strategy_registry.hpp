// One descriptor per strategy: its name, its layer in the chain, its capability flags, its options
// (key, kind, default, help) and the hooks that build it. The chain builder (chain_builder.cpp), the
// Node binding (binding/resource_object.cpp), libgpumem_torch (torch/config.cpp) and the TypeScript
// strategy packages (their options.generated.ts, written by scripts/sync-strategies.mjs) all read
// these descriptors; none of them keeps a per-strategy switch or key list of its own. A descriptor
// writes each option in one line (gpumem/strategy_options.hpp).
//
// Each descriptor is defined in its resource's own .cpp (pool_strategy() in pool_resource.cpp, ...).
// They are collected by an explicit list, GPUMEM_STRATEGIES below, rather than by static registrars:
// gpumem_core is a static library, and the linker leaves out an object file that nothing references,
// so a registrar object in a resource's .cpp would silently vanish from libgpumem_torch.so or from a
// test that does not otherwise use that resource. The list references every descriptor function,
// which keeps every one linked.
//
// A strategy's options struct (pool_spec, ...) is declared in its resource's header and named by
// its descriptor (options_type); a chain_spec holds it type-erased (chain_spec::options<T>()), so
// neither chain_spec nor the builder names any strategy. Adding a strategy touches its resource's
// header and .cpp (the resource, its options struct, its descriptor function; native/CMakeLists.txt
// globs src/core/resources/*.cpp) and one line in GPUMEM_STRATEGIES below: nothing else.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>
#include <variant>
#include <vector>

#include "gpumem/chain_builder.hpp"
#include "gpumem/memory_resource.hpp"
#include "gpumem/vmm.hpp"

namespace gpumem {

// Every strategy, in the order of the registry (and of the lists error messages give): X(name)
// declares `const strategy_descriptor& name_strategy()`, defined in the resource's own .cpp.
#define GPUMEM_STRATEGIES(X) \
  X(host)                    \
  X(cuda)                    \
  X(uvm)                     \
  X(pool)                    \
  X(async)                   \
  X(plugin)                  \
  X(expandable)              \
  X(pinned)                  \
  X(tiered)                  \
  X(caching)

// How an option's value is written and checked.
enum class option_kind {
  bytes,   // a byte count: a non-negative integer (JavaScript), or a size with units (text: 512MiB)
  count,   // a non-negative integer that is not a size
  boolean, // true/false (JavaScript), 1/0 (text)
  choice,  // one of `choices`
  number,  // a finite number
  text,    // any string
};
const char* option_kind_name(option_kind kind) noexcept;  // "bytes", "count", "boolean", "choice", "number", "text"

// A parsed option value: monostate where unset.
using option_value = std::variant<std::monostate, std::uint64_t, bool, double, std::string>;

// Where an option may be given: in the Node binding's spec, in libgpumem_torch's environment.
// front_native: a capability flag only the native side reads (GPUMEM_STRATEGY_FLAGS).
enum option_front : unsigned { front_native = 0u, front_js = 1u, front_env = 2u, front_both = 3u };

struct option_descriptor {
  std::string key;   // the spec's key ("maxReservedBytes")
  option_kind kind = option_kind::bytes;
  std::uint64_t minimum = 0;          // bytes/count: the smallest value accepted (1: positive)
  std::vector<std::string> choices;   // choice: the accepted values, in the order messages list them
  std::string default_text;           // the default in the option's text form ("" where unset by default)
  std::string help;                   // one line
  // The longer documentation (the TSDoc of the TypeScript option scripts/sync-strategies.mjs
  // generates); "" where the help says it all.
  std::string doc;
  // A choice that says where the memory is: 'host' is host memory, any other choice memory of the
  // CUDA device `device`. The TypeScript option also takes 'auto', its default there: the first
  // other choice where a CUDA device is present, else 'host'.
  bool placement = false;
  unsigned fronts = front_both;
  // libgpumem_torch: the variable that sets it (empty: not settable there).
  std::string env;
  // libgpumem_torch: where 0 means unset, what unset means ("no cap"); the variable then takes 0.
  std::string env_zero_means;
  // libgpumem_torch: the variable is an error unless GPUMEM_ALLOCATOR names a strategy that has it.
  bool env_strict = false;
  // Must be given (a strategy that cannot be made without it); `required_form` shows its form.
  bool required = false;
  std::string required_form;
  // libgpumem_torch's one-line description (describe()): "label=value", or "label=unset_text".
  std::string label;
  std::string unset_text = "default";
  // Sets the option in a spec of this strategy; reads it back (monostate where unset). Both reach the
  // strategy's options through chain_spec::options<T>() with T its descriptor's options_type.
  std::function<void(chain_spec& spec, const option_value& value)> apply;
  std::function<option_value(const chain_spec& spec)> read;
};

// A strategy's capability flags, each named once here: X(member, key, front, doc), `key` its name in
// strategies_json() and in TypeScript, `front` front_js where the TypeScript registry has it
// (packages/allocator-core/src/flags.generated.ts, written by scripts/sync-strategies.mjs from
// strategy_flags_json(), and each strategy's options.generated.ts) or front_native where only the
// native side uses it. Every flag is false unless a descriptor sets it, except kernel_memory.
#define GPUMEM_STRATEGY_FLAGS(X)                                                                                        \
  X(requires_cuda, "requiresCuda", front_js, "True when the strategy needs a CUDA device (it cannot run on the host alone).") \
  X(capturable, "capturable", front_js,                                                                                 \
    "True when the strategy's malloc and free make no driver calls once warm and never synchronise, so work that "      \
    "allocates can be captured into a CUDA graph (the trainer's `cudaGraph` mode).")                                  \
  X(host_memory, "hostMemory", front_js,                                                                                \
    "True when the strategy keeps its memory on the host (comparisons on a GPU leave it out by default).")            \
  X(requires_options, "requiresOptions", front_js,                                                                      \
    "True when the strategy cannot be created without options (e.g. 'plugin' needs its library), so lists of every "   \
    "strategy (a comparison's or a replay's default) leave it out; name it to use it.")                               \
  X(managed_memory, "managedMemory", front_js,                                                                          \
    "True when the strategy allocates managed (unified) memory. Asking for more than the device has free "             \
    "oversubscribes it, which pages on demand and can hang a shared GPU, so planners (train()) keep what they ask of " \
    "it within the device's free memory.")                                                                              \
  X(spills_to_host, "spillsToHost", front_js,                                                                           \
    "True when the strategy can hold more than the device by keeping part of its memory in (pinned) host memory that " \
    "kernels use in place, e.g. 'tiered': planners count the host's available memory beside the device's.")            \
  X(peer_access, "peerAccess", front_js,                                                                                \
    "True when the strategy takes the `peerAccess` option: CUDA devices (ordinals) that may read and write its "       \
    "memory besides its own (multi-GPU work reads another device's memory in place).")                                \
  X(sleep, "sleep", front_js,                                                                                           \
    "True when the strategy can put the memory of some tags to sleep and wake it at the same addresses: its "          \
    "allocators have `sleep`, `wake`, `tagStats` and `trimBackup` (see `Allocator.sleep`). Strategies whose memory is " \
    "mapped through virtual memory management.")                                                                        \
  X(address_only, "addressOnly", front_js,                                                                              \
    "True when the strategy's logic never reads or writes its memory, so that it runs over address-only memory "       \
    "(addresses backed by nothing, the native layer option `addressOnly`) exactly as over its own, taking none: a "    \
    "replay that only asks whether a trace fits then answers the same on any machine, whatever its memory. Native "    \
    "strategies whose descriptor has the flag.")                                                                        \
  X(host_device, "hostDevice", front_native, "Device -1 selects host memory.")                                             \
  X(kernel_memory, "kernelMemory", front_native, "CUDA kernels can use the memory (what PyTorch needs of a strategy).")

// The flags of one strategy (GPUMEM_STRATEGY_FLAGS). sleep: its leaf is sleepable
// (gpumem/sleep.hpp); address_only: set by the descriptor's make_address_only_leaf
// (gpumem/address_only.hpp, chain_spec::address_only).
struct strategy_flags {
#define GPUMEM_FLAG_MEMBER(member, key, front, doc) bool member = false;
  GPUMEM_STRATEGY_FLAGS(GPUMEM_FLAG_MEMBER)
#undef GPUMEM_FLAG_MEMBER
  strategy_flags() { kernel_memory = true; }
};

// Where the strategy sits in the chain: a leaf alone, or a cache or adaptor over a leaf of its own.
enum class strategy_layer { leaf, cache, adaptor };
const char* strategy_layer_name(strategy_layer layer) noexcept;  // "leaf", "cache", "adaptor"

// While a chain is built (chain_builder.cpp): the chain so far, and the VMM (gpumem/vmm.hpp) of a
// strategy that maps granules (expandable), which the fault and limit layers wrap until the
// strategy's layer takes it.
struct chain_build {
  resource_chain& chain;
  std::unique_ptr<vmm> physical;
};

// Something a strategy calls on a CUDA device: a driver entry point ("cuMemCreate") or a feature
// ("host-located cuMemCreate (CU_MEM_LOCATION_TYPE_HOST_NUMA)"), and the CUDA version whose driver
// first has it (cuda.h's __CUDA_API_VERSION history). gpumem/driver_support.hpp checks them against
// the running driver.
struct driver_need {
  std::string what;
  int version = 0;  // e.g. 12020 for CUDA 12.2
};

struct strategy_descriptor {
  std::string name;
  // Older names of the strategy, still accepted by find_strategy and parse_strategy for one release
  // (deprecated: libgpumem_torch warns when one is read). Each also names the strategy's variables:
  // GPUMEM_<ALIAS>_<REST> is read for GPUMEM_<NAME>_<REST> (option_env_aliases).
  std::vector<std::string> aliases;
  std::string description;
  // The type of the strategy's options in a chain_spec (typeid(pool_spec) for 'pool'); nullptr for a
  // strategy without options. validate() rejects a spec that holds options of another type.
  const std::type_info* options_type = nullptr;
  strategy_layer layer = strategy_layer::leaf;
  std::string wraps;  // cache/adaptor: what it is over ("cudaMalloc (upstream 'cuda') or host memory")
  strategy_flags flags;
  std::vector<option_descriptor> options;  // in the order they are described
  // What it calls on a CUDA device beyond the driver layer's floor (CUDA 12.0): a driver without one
  // of these refuses the strategy by name (driver_unsupported) rather than failing a call later.
  std::vector<driver_need> driver_needs;

  // The leaf: its name in chain_layers() and how it is made. A leaf over a VMM sets
  // build.physical and returns nullptr.
  const char* (*leaf_name)(const chain_spec& spec) = nullptr;
  std::unique_ptr<memory_resource> (*make_leaf)(const chain_spec& spec, chain_build& build) = nullptr;
  // The strategy's layer over the (fault-injected, limited) leaf: nullptr name where there is none.
  // The leaf that stands for make_leaf's under chain_spec::address_only: an address-only resource,
  // or (a strategy over a VMM) build.physical set to an address-only VMM and
  // nullptr returned. Set exactly where flags.address_only is.
  std::unique_ptr<memory_resource> (*make_address_only_leaf)(const chain_spec& spec, chain_build& build) = nullptr;
  const char* (*layer_name)(const chain_spec& spec) = nullptr;
  std::unique_ptr<memory_resource> (*make_layer)(const chain_spec& spec, chain_build& build) = nullptr;
  // Checks beyond each option's own (throws invalid_argument naming the field); may be null.
  void (*validate)(const chain_spec& spec) = nullptr;
  // Why the memory cannot take peerAccess (not on a CUDA device); "" where it can.
  std::string (*no_peer_access)(const chain_spec& spec) = nullptr;
  // The bytes the strategy's own options cap it at ('pool''s maxReservedBytes), 0 for none; may be
  // null. A front end's capacity counts it as a limit (libgpumem_torch's out-of-memory report).
  std::uint64_t (*own_cap_bytes)(const chain_spec& spec) = nullptr;
  // Why a device strategy has no address-only twin (without the address_only flag), said where a
  // replay leaves it out (libgpumem_torch's out-of-memory report); "" where nothing needs saying.
  std::string no_address_only;
  // A limit that libgpumem_torch puts under the strategy from a variable of the strategy's own, beside
  // its options: 'free' (the default: the device's free memory less a margin, for memory that can
  // outgrow the device, as managed memory can), 'none' or a size. `variable` empty: no such limit.
  // `label` names it in the library's description of its configuration.
  struct front_limit_setting {
    std::string variable;  // e.g. GPUMEM_UVM_LIMIT
    std::string label;     // e.g. uvm.limit
  };
  front_limit_setting front_limit;
  // An older spelling that libgpumem_torch still reads, with a warning, until it is removed:
  // GPUMEM_ALLOCATOR=<name>:<value> sets option `key` ('plugin:PATH' for plugin with
  // GPUMEM_PLUGIN_LIBRARY=PATH). `key` empty: none. `placeholder` names the value in messages.
  struct inline_option_spelling {
    std::string key;          // e.g. library
    std::string placeholder;  // e.g. path
  };
  inline_option_spelling inline_option;

  // The option `key` (JavaScript key), or nullptr.
  const option_descriptor* option(std::string_view key) const noexcept;
  // "a, b, c": the option keys given in `front`.
  std::string option_keys(unsigned front) const;
};

#define GPUMEM_DECLARE_STRATEGY(name) const strategy_descriptor& name##_strategy();
GPUMEM_STRATEGIES(GPUMEM_DECLARE_STRATEGY)
#undef GPUMEM_DECLARE_STRATEGY

// Every registered strategy, in the order of GPUMEM_STRATEGIES.
const std::vector<const strategy_descriptor*>& strategies();
// The strategy named `name` (or by one of its aliases), or nullptr.
const strategy_descriptor* find_strategy(std::string_view name) noexcept;
// The strategy named `name` (or by one of its aliases); throws invalid_argument (type, field
// "strategy") listing the registered names for anything else.
const strategy_descriptor& parse_strategy(std::string_view name);
// The older spellings of an option's variable under the strategy's aliases, deprecated:
// {"GPUMEM_NATIVE_LIBRARY"} for the plug-in strategy's GPUMEM_PLUGIN_LIBRARY (alias 'native').
// Empty where the option has no variable or its variable does not begin with GPUMEM_<NAME>_.
std::vector<std::string> option_env_aliases(const strategy_descriptor& strategy, const option_descriptor& option);
// The descriptor of the spec's strategy (parse_strategy(spec.strategy)).
const strategy_descriptor& strategy_of(const chain_spec& spec);

// Text forms (libgpumem_torch's variables, the defaults). parse_option_text returns false where
// `text` is not the option's form (a choice is matched without regard to case);
// option_text_expected says what the form is ("a size: ...", "0 or 1", "one of none, device, host").
bool parse_option_text(const option_descriptor& option, const std::string& text, option_value& out);
std::string option_text_expected(const option_descriptor& option);
// A value in its text form ("" for monostate).
std::string option_text(const option_value& value);

// The registry as JSON, its one serialiser (libgpumem_torch returns it; the addon's strategies() is
// it less the options JavaScript does not take and the keys that hold nothing): [{"name", "aliases",
// "description", "layer", "wraps", "flags": {...}, "options": [{"key", "kind", "minimum", "choices",
// "default", "required", "help", "doc", "placement", "js", "env", "envAliases"}]}]. Each strategy is
// listed once, by its name; "aliases" are its deprecated names and "envAliases" the deprecated
// spellings of an option's variable (option_env_aliases). "flags" holds every flag of
// GPUMEM_STRATEGY_FLAGS by its key.
std::string strategies_json();
// The flags themselves as JSON: [{"key", "js", "doc"}] in the order of GPUMEM_STRATEGY_FLAGS ("js":
// the TypeScript registry has it). The addon's strategyFlags(); code generation reads it.
std::string strategy_flags_json();

}  // namespace gpumem
