#include "replay_twins.hpp"

#include "gpumem/errors.hpp"
#include "gpumem/strategy_registry.hpp"

namespace gpumem::torch {

namespace {

bool replayable(const strategy_descriptor& d) noexcept { return d.flags.address_only && !d.flags.host_memory; }

}  // namespace

const std::vector<std::string>& replayed_strategies() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const strategy_descriptor* d : strategies()) {
      if (replayable(*d)) out.push_back(d->name);
    }
    return out;
  }();
  return names;
}

replay_twin make_replay_twin(const std::string& name, std::uint64_t capacity_bytes, const chain_spec* configured) {
  const strategy_descriptor* d = find_strategy(name);
  if (d == nullptr || !replayable(*d)) {
    std::string list;
    for (const std::string& n : replayed_strategies()) list += (list.empty() ? "" : ", ") + n;
    throw invalid_argument(invalid_argument::kind::range, "strategy",
                           "Expected one of " + list + " for the out-of-memory replay but received '" + name + "'");
  }
  chain_spec spec;
  if (configured != nullptr && configured->strategy == d->name) spec = *configured;  // the process's own options
  spec.strategy = d->name;
  spec.device = 0;  // addresses only: no device is touched
  spec.peer_access.clear();
  spec.limit_bytes = capacity_bytes;
  spec.fault_injection.reset();
  spec.tracking_capacity.reset();
  spec.address_only = true;
  return replay_twin{build_chain(spec)};
}

}  // namespace gpumem::torch
