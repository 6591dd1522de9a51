#include "config.hpp"

#include <cctype>

#include "gpumem/sizes.hpp"

namespace gpumem::torch {
namespace {

bool parse_size(const std::string& text, std::uint64_t& out) { return gpumem::try_parse_size(text, out); }

std::string size_expected() { return std::string("a size: ") + gpumem::size_form + ", e.g. 1073741824, 512MiB or 4GiB"; }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string bad_value(const char* name, const std::string& value, const std::string& expected) {
  return std::string(name) + "='" + value + "' is not valid: expected " + expected;
}

// The value of `name`, or nullopt where unset or empty.
std::optional<std::string> read(const env_reader& env, const char* name) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace

const char* strategy_name(strategy_kind k) {
  switch (k) {
    case strategy_kind::cuda: return "cuda";
    case strategy_kind::uvm: return "uvm";
    case strategy_kind::pool: return "pool";
    case strategy_kind::async: return "async";
    case strategy_kind::expandable: return "expandable";
    case strategy_kind::pinned: return "pinned";
    case strategy_kind::tiered: return "tiered";
    case strategy_kind::native: return "native";
  }
  return "pool";
}

const char* placement_name(tier_placement p) {
  switch (p) {
    case tier_placement::automatic: return "auto";
    case tier_placement::device: return "device";
    case tier_placement::host: return "host";
  }
  return "auto";
}

const char* const config_variables[] = {
    "GPUMEM_ALLOCATOR",           "GPUMEM_NATIVE_LIBRARY",      "GPUMEM_UVM_PREFETCH",
    "GPUMEM_UVM_ADVISE",          "GPUMEM_UVM_LIMIT",           "GPUMEM_ASYNC_RELEASE_THRESHOLD",
    "GPUMEM_POOL_MAX_RESERVED",   "GPUMEM_PLUGIN_OPTIONS",      "GPUMEM_TIERED_DEVICE_BUDGET",
    "GPUMEM_TIERED_HOST_BUDGET",  "GPUMEM_TIERED_PLACEMENT",    "GPUMEM_OOM",
};
const std::size_t config_variable_count = sizeof(config_variables) / sizeof(config_variables[0]);

bool parse_spec(const std::string& spec, std::vector<std::pair<std::string, std::string>>& out, std::string& error) {
  out.clear();
  std::size_t start = 0;
  while (start <= spec.size()) {
    std::size_t end = spec.find('\n', start);
    if (end == std::string::npos) end = spec.size();
    const std::string line = spec.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    const std::size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) {
      error = "configuration line '" + line + "' is not NAME=value";
      return false;
    }
    const std::string name = line.substr(0, eq);
    bool known = false;
    for (std::size_t i = 0; i < config_variable_count; ++i) known = known || name == config_variables[i];
    if (!known) {
      std::string names;
      for (std::size_t i = 0; i < config_variable_count; ++i) names += std::string(i ? ", " : "") + config_variables[i];
      error = "configuration line '" + line + "' names no setting of libgpumem_torch (expected one of " + names + ")";
      return false;
    }
    for (const auto& kv : out) {
      if (kv.first == name) {
        error = "configuration names " + name + " twice";
        return false;
      }
    }
    out.emplace_back(name, line.substr(eq + 1));
  }
  return true;
}

bool parse_config(const env_reader& env, config& out, std::string& error) {
  config c;
  if (auto v = read(env, "GPUMEM_ALLOCATOR")) {
    std::string s = lower(*v);
    if (s.rfind("plugin:", 0) == 0) {  // 'native' by its older spelling; the path keeps its case
      c.strategy = strategy_kind::native;
      c.plugin_library = v->substr(7);
      if (c.plugin_library.empty()) {
        error = bad_value("GPUMEM_ALLOCATOR", *v, "plugin:<path of a gpumem plug-in library>");
        return false;
      }
    } else if (s == "cuda") c.strategy = strategy_kind::cuda;
    else if (s == "uvm") c.strategy = strategy_kind::uvm;
    else if (s == "pool") c.strategy = strategy_kind::pool;
    else if (s == "async") c.strategy = strategy_kind::async;
    else if (s == "expandable") c.strategy = strategy_kind::expandable;
    else if (s == "pinned") c.strategy = strategy_kind::pinned;
    else if (s == "tiered") c.strategy = strategy_kind::tiered;
    else if (s == "native") c.strategy = strategy_kind::native;
    else {
      error = bad_value("GPUMEM_ALLOCATOR", *v,
                        "one of cuda, uvm, pool, async, expandable, pinned, tiered, native, plugin:<library path>");
      return false;
    }
  }
  if (auto v = read(env, "GPUMEM_NATIVE_LIBRARY")) {
    if (c.strategy != strategy_kind::native || !c.plugin_library.empty()) {
      error = bad_value("GPUMEM_NATIVE_LIBRARY", *v, "GPUMEM_ALLOCATOR=native as well (plugin:<path> names the library itself)");
      return false;
    }
    c.plugin_library = *v;
  }
  if (c.strategy == strategy_kind::native && c.plugin_library.empty()) {
    error = "GPUMEM_ALLOCATOR=native needs GPUMEM_NATIVE_LIBRARY=<path of a gpumem plug-in library> "
            "(or GPUMEM_ALLOCATOR=plugin:<path>)";
    return false;
  }
  if (auto v = read(env, "GPUMEM_UVM_PREFETCH")) {
    if (*v == "1") c.uvm_prefetch = true;
    else if (*v == "0") c.uvm_prefetch = false;
    else {
      error = bad_value("GPUMEM_UVM_PREFETCH", *v, "0 or 1");
      return false;
    }
  }
  if (auto v = read(env, "GPUMEM_UVM_ADVISE")) {
    std::string s = lower(*v);
    if (s == "none") c.advise = uvm_advise::none;
    else if (s == "device") c.advise = uvm_advise::device;
    else if (s == "host") c.advise = uvm_advise::host;
    else {
      error = bad_value("GPUMEM_UVM_ADVISE", *v, "one of none, device, host");
      return false;
    }
  }
  if (auto v = read(env, "GPUMEM_UVM_LIMIT")) {
    std::string s = lower(*v);
    if (s == "free") c.uvm_limit = uvm_limit_mode::free_memory;
    else if (s == "none") c.uvm_limit = uvm_limit_mode::none;
    else if (parse_size(*v, c.uvm_limit_bytes) && c.uvm_limit_bytes > 0) c.uvm_limit = uvm_limit_mode::bytes;
    else {
      error = bad_value("GPUMEM_UVM_LIMIT", *v, "'free', 'none' or a positive " + size_expected());
      return false;
    }
  }
  if (auto v = read(env, "GPUMEM_ASYNC_RELEASE_THRESHOLD")) {
    std::uint64_t bytes = 0;
    if (!parse_size(*v, bytes)) {
      error = bad_value("GPUMEM_ASYNC_RELEASE_THRESHOLD", *v, size_expected());
      return false;
    }
    c.async_release_threshold = bytes;
  }
  if (auto v = read(env, "GPUMEM_POOL_MAX_RESERVED")) {
    if (!parse_size(*v, c.pool_max_reserved)) {
      error = bad_value("GPUMEM_POOL_MAX_RESERVED", *v, size_expected() + " (0: no cap)");
      return false;
    }
  }
  if (auto v = read(env, "GPUMEM_PLUGIN_OPTIONS")) {
    if (c.strategy != strategy_kind::native) {
      error = bad_value("GPUMEM_PLUGIN_OPTIONS", *v, "GPUMEM_ALLOCATOR=plugin:<library path> (or native) as well");
      return false;
    }
    c.plugin_options = *v;
  }
  for (auto [name, target] : {std::pair{"GPUMEM_TIERED_DEVICE_BUDGET", &c.tiered_device_budget},
                              std::pair{"GPUMEM_TIERED_HOST_BUDGET", &c.tiered_host_budget}}) {
    if (auto v = read(env, name)) {
      std::uint64_t bytes = 0;
      if (!parse_size(*v, bytes)) {
        error = bad_value(name, *v, size_expected());
        return false;
      }
      *target = bytes;
    }
  }
  if (auto v = read(env, "GPUMEM_TIERED_PLACEMENT")) {
    std::string s = lower(*v);
    if (s == "auto") c.tiered_placement = tier_placement::automatic;
    else if (s == "device") c.tiered_placement = tier_placement::device;
    else if (s == "host") c.tiered_placement = tier_placement::host;
    else {
      error = bad_value("GPUMEM_TIERED_PLACEMENT", *v, "one of auto, device, host");
      return false;
    }
  }
  if (auto v = read(env, "GPUMEM_OOM")) {
    std::string s = lower(*v);
    if (s == "raise") c.oom = oom_mode::raise;
    else if (s == "null") c.oom = oom_mode::null;
    else {
      error = bad_value("GPUMEM_OOM", *v, "raise or null");
      return false;
    }
  }
  out = c;
  return true;
}

gpumem::chain_spec chain_spec_for(const config& c, int device, std::uint64_t free_bytes) {
  gpumem::chain_spec spec;
  spec.device = device;
  switch (c.strategy) {
    case strategy_kind::cuda: spec.strategy = gpumem::strategy_kind::cuda; break;
    case strategy_kind::pool:
      spec.strategy = gpumem::strategy_kind::pool;
      spec.pool.upstream = gpumem::pool_upstream::cuda;
      spec.pool.options.max_reserved_bytes = c.pool_max_reserved;
      break;
    case strategy_kind::async:
      spec.strategy = gpumem::strategy_kind::async;
      if (c.async_release_threshold) spec.async.release_threshold = *c.async_release_threshold;
      break;
    case strategy_kind::expandable:  // CUDA VMM on the device, with the strategy's defaults
      spec.strategy = gpumem::strategy_kind::expandable;
      spec.expandable.backing = gpumem::expandable_backing::device;
      break;
    case strategy_kind::pinned:  // a pool over mapped pinned host memory (kernels read it in place)
      spec.strategy = gpumem::strategy_kind::pinned;
      spec.pinned.upstream = gpumem::pinned_upstream::pinned;
      spec.pinned.options.max_reserved_bytes = c.pool_max_reserved;
      break;
    case strategy_kind::tiered:  // CUDA VMM: device memory, then pinned host memory
      spec.strategy = gpumem::strategy_kind::tiered;
      spec.tiered.backing = gpumem::tiered_backing::device;
      spec.tiered.options.device_budget_bytes = c.tiered_device_budget;
      spec.tiered.options.host_budget_bytes = c.tiered_host_budget;
      spec.tiered.options.placement = c.tiered_placement == tier_placement::device ? gpumem::tier_choice::device
                                      : c.tiered_placement == tier_placement::host ? gpumem::tier_choice::host
                                                                                     : gpumem::tier_choice::automatic;
      break;
    case strategy_kind::native:
      spec.strategy = gpumem::strategy_kind::native;
      spec.native.library = c.plugin_library;
      spec.native.options = c.plugin_options;
      break;
    case strategy_kind::uvm: {
      spec.strategy = gpumem::strategy_kind::uvm;
      spec.uvm.prefetch_on_allocate = c.uvm_prefetch;
      if (c.advise != uvm_advise::none) {
        spec.uvm.advice.preferred_location =
            c.advise == uvm_advise::host ? gpumem::advise_target::host : gpumem::advise_target::device;
        spec.uvm.advice.accessed_by = gpumem::advise_target::device;
      }
      if (c.uvm_limit == uvm_limit_mode::bytes) {
        spec.limit_bytes = c.uvm_limit_bytes;
      } else if (c.uvm_limit == uvm_limit_mode::free_memory) {
        const std::uint64_t limit = free_bytes > uvm_free_margin ? free_bytes - uvm_free_margin : free_bytes / 2;
        if (limit != 0) spec.limit_bytes = limit;
      }
      break;
    }
  }
  return spec;
}

std::string describe(const config& c) {
  std::string s = std::string("strategy=") + strategy_name(c.strategy);
  switch (c.strategy) {
    case strategy_kind::cuda: break;
    case strategy_kind::uvm: {
      s += std::string(" uvm.prefetch=") + (c.uvm_prefetch ? "1" : "0");
      s += std::string(" uvm.advise=") +
           (c.advise == uvm_advise::device ? "device" : c.advise == uvm_advise::host ? "host" : "none");
      s += " uvm.limit=";
      if (c.uvm_limit == uvm_limit_mode::free_memory) s += "free";
      else if (c.uvm_limit == uvm_limit_mode::none) s += "none";
      else s += std::to_string(c.uvm_limit_bytes);
      break;
    }
    case strategy_kind::pool:
    case strategy_kind::pinned:
      s += std::string(c.strategy == strategy_kind::pool ? " pool.upstream=cuda" : " pool.upstream=pinned") +
           " pool.max_reserved=" + (c.pool_max_reserved == 0 ? std::string("none") : std::to_string(c.pool_max_reserved));
      break;
    case strategy_kind::tiered: {
      auto budget = [](const std::optional<std::uint64_t>& b) { return b ? std::to_string(*b) : std::string("default"); };
      s += " tiered.device_budget=" + budget(c.tiered_device_budget) + " tiered.host_budget=" +
           budget(c.tiered_host_budget) + " tiered.placement=" + placement_name(c.tiered_placement);
      break;
    }
    case strategy_kind::async:
      s += " async.release_threshold=" +
           (c.async_release_threshold ? std::to_string(*c.async_release_threshold) : std::string("keep-all"));
      break;
    case strategy_kind::expandable: break;
    case strategy_kind::native:
      s += " plugin.library=" + c.plugin_library + " plugin.options=" + c.plugin_options;
      break;
  }
  s += std::string(" oom=") + (c.oom == oom_mode::raise ? "raise" : "null");
  return s;
}

}  // namespace gpumem::torch
