#include "gpumem/chain_builder.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpumem/driver_support.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/fault_injecting_adaptor.hpp"
#include "gpumem/limiting_adaptor.hpp"
#include "gpumem/peer_access.hpp"
#include "gpumem/vmm.hpp"
#include "gpumem/sizes.hpp"
#include "gpumem/strategy_registry.hpp"

namespace gpumem {
namespace {

[[noreturn]] void reject(const std::string& field, const std::string& expected, const std::string& received) {
  throw invalid_argument(invalid_argument::kind::range, field,
                         "Expected " + expected + " for " + field + " but received " + received);
}

void positive(const std::optional<std::uint64_t>& v, const char* field) {
  if (v && *v == 0) reject(field, "positive integer", "0");
}

fault_options to_fault_options(const fault_spec& f) {
  fault_options o;
  if (f.fail_every) o.fail_every = *f.fail_every;
  if (f.fail_after_bytes) o.fail_after_bytes = *f.fail_after_bytes;
  return o;
}

}  // namespace

// --- the chain builder ----------------------------------------------------------------------------

resource_chain::~resource_chain() {
  while (!layers.empty()) layers.pop_back();
}

void validate(const chain_spec& spec) {
  const strategy_descriptor& d = strategy_of(spec);
  // The options a C++ caller set must be this strategy's (its hooks read them as options_type).
  if (spec.has_options() && (d.options_type == nullptr || spec.options_type() != *d.options_type)) {
    throw invalid_argument(invalid_argument::kind::type, "options",
                           "Expected the options of strategy '" + d.name + "' but the spec holds another strategy's");
  }
  if (d.flags.host_device) {
    if (spec.device < -1) reject("device", "non-negative integer or -1 (host memory)", std::to_string(spec.device));
  } else if (spec.device < 0) {
    reject("device", "non-negative integer", std::to_string(spec.device));
  }
  for (const option_descriptor& o : d.options) {
    if (o.required && o.read) {
      const option_value v = o.read(spec);
      if (std::holds_alternative<std::monostate>(v)) reject(o.key, "a non-empty path", "''");
    }
  }
  positive(spec.limit_bytes, "limitBytes");
  positive(spec.tracking_capacity, "trackingCapacity");
  if (spec.address_only && !d.flags.address_only) {
    std::string able;
    for (const strategy_descriptor* s : strategies()) {
      if (s->flags.address_only) able += (able.empty() ? "'" : ", '") + s->name + "'";
    }
    throw invalid_argument(invalid_argument::kind::type, "addressOnly",
                           "Expected addressOnly only for a strategy that runs over address-only memory (" + able +
                               ") but received it for '" + d.name + "'");
  }
  if (spec.fault_injection) {
    const fault_spec& f = *spec.fault_injection;
    if (!f.fail_every && !f.fail_after_bytes) {
      throw invalid_argument(invalid_argument::kind::type, "faultInjection",
                             "Expected failEvery and/or failAfterBytes in faultInjection but received neither");
    }
    positive(f.fail_every, "faultInjection.failEvery");
  }
  for (const option_descriptor& o : d.options) {
    if ((o.kind != option_kind::bytes && o.kind != option_kind::count) || o.minimum == 0 || !o.read) continue;
    const option_value v = o.read(spec);
    if (std::holds_alternative<std::uint64_t>(v) && std::get<std::uint64_t>(v) < o.minimum) {
      reject(o.key, o.minimum == 1 ? "positive integer" : "integer >= " + std::to_string(o.minimum),
             std::to_string(std::get<std::uint64_t>(v)));
    }
  }
  if (d.validate) d.validate(spec);
  if (!spec.peer_access.empty()) {
    const std::string why = d.no_peer_access ? d.no_peer_access(spec) : "";
    if (!why.empty()) {
      throw invalid_argument(invalid_argument::kind::type, "peerAccess",
                             "Expected peerAccess only for memory on a CUDA device but " + why);
    }
    check_peer_access(spec.device, spec.peer_access);
  }
}

// The layer order, bottom first: the one place it is decided (see chain_builder.hpp).
std::vector<std::string> chain_layers(const chain_spec& spec) {
  const strategy_descriptor& d = strategy_of(spec);
  std::vector<std::string> names{spec.address_only ? "addresses" : d.leaf_name(spec)};
  if (spec.fault_injection) names.emplace_back("fault");
  if (spec.limit_bytes) names.emplace_back("limit");
  if (d.layer_name && d.layer_name(spec)) names.emplace_back(d.layer_name(spec));
  if (spec.tracking_capacity) names.emplace_back("track");
  return names;
}

resource_chain build_chain(const chain_spec& spec) {
  validate(spec);
  const strategy_descriptor& d = strategy_of(spec);
  // On a CUDA device, a driver older than the strategy needs refuses it by name.
  if (!spec.address_only && spec.device >= 0) require_driver(d);
  resource_chain chain;  // on a throw, its destructor undoes the layers built so far
  chain_build build{chain, nullptr};
  if (auto leaf = spec.address_only ? d.make_address_only_leaf(spec, build) : d.make_leaf(spec, build))
    chain.layers.push_back(std::move(leaf));
  // fault and limit wrap the VMM of a strategy that maps granules, else the leaf.
  if (spec.fault_injection) {
    if (build.physical) {
      build.physical = make_fault_injecting_vmm(std::move(build.physical), to_fault_options(*spec.fault_injection));
    } else {
      chain.layers.push_back(std::make_unique<fault_injecting_adaptor>(chain.top(), to_fault_options(*spec.fault_injection)));
    }
  }
  if (spec.limit_bytes) {
    if (build.physical) {
      build.physical = make_limited_vmm(std::move(build.physical), *spec.limit_bytes);
    } else {
      chain.layers.push_back(std::make_unique<limiting_adaptor>(chain.top(), *spec.limit_bytes));
    }
  }
  if (d.layer_name && d.layer_name(spec)) chain.layers.push_back(d.make_layer(spec, build));
  if (build.physical) throw invalid_state("strategy '" + d.name + "' left its physical memory unused");
  if (spec.tracking_capacity) {
    auto t = std::make_unique<tracking_adaptor>(chain.top(), *spec.tracking_capacity);
    chain.tracker = t.get();
    chain.layers.push_back(std::move(t));
  }
  return chain;
}

}  // namespace gpumem
