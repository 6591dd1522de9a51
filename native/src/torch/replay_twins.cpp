#include "replay_twins.hpp"

#include "gpumem/address_only.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/expandable_resource.hpp"
#include "gpumem/limiting_adaptor.hpp"
#include "gpumem/physical_memory.hpp"
#include "gpumem/pool_resource.hpp"

namespace gpumem::torch {

namespace {

// A CUDA device's granule for virtual memory management (cuMemGetAllocationGranularity's
// recommendation on current GPUs).
constexpr std::size_t device_granule = std::size_t{2} << 20;

}  // namespace

replay_twin::~replay_twin() {
  while (!layers.empty()) layers.pop_back();
}

const std::vector<std::string>& replayed_strategies() {
  static const std::vector<std::string> names{"pool", "expandable"};
  return names;
}

replay_twin make_replay_twin(const std::string& name, std::uint64_t capacity_bytes, const chain_spec* configured) {
  const bool own = configured != nullptr && configured->strategy == name;
  replay_twin t;
  if (name == "pool") {
    t.layers.push_back(make_address_only_resource());
    t.layers.push_back(std::make_unique<limiting_adaptor>(*t.layers.back(), static_cast<std::size_t>(capacity_bytes)));
    const pool_options options = own ? configured->options<pool_spec>().options : pool_options{};
    t.layers.push_back(std::make_unique<pool_resource>(*t.layers.back(), options));
    return t;
  }
  if (name == "expandable") {
    expandable_options options;
    std::size_t granule = device_granule;
    if (own) {
      const expandable_spec& s = configured->options<expandable_spec>();
      options = s.options;
      if (s.granule_bytes != 0) granule = static_cast<std::size_t>(s.granule_bytes);
    }
    options.backup_limit_bytes = 0;  // never sleeps here
    options.capacity_bytes = capacity_bytes;
    if (options.reserve_bytes == 0 || options.reserve_bytes > capacity_bytes) options.reserve_bytes = 0;
    auto memory = make_limited_physical_memory(make_address_only_physical_memory(granule, capacity_bytes), capacity_bytes);
    t.layers.push_back(std::make_unique<expandable_resource>(std::move(memory), options));
    return t;
  }
  throw invalid_argument(invalid_argument::kind::range, "strategy",
                         "Expected one of pool, expandable for the out-of-memory replay but received '" + name + "'");
}

}  // namespace gpumem::torch
