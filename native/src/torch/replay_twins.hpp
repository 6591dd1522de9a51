// Address-only twins of the device strategies, for the out-of-memory report's replay
// (oom_report.hpp): each strategy whose descriptor has the address_only flag, built by the core's
// chain builder over a leaf that hands out addresses and counts bytes but backs them with nothing
// (chain_spec::address_only), capped at a capacity by the core's limit layer. The replay runs inside
// the process whose allocation just failed, possibly at tens of GiB: the host twins would commit host
// memory for it, these take none. No address they return may be read or written. Host code, no CUDA.
// Nothing here names a strategy: the registry says which ones replay.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/chain_builder.hpp"
#include "gpumem/memory_resource.hpp"

namespace gpumem::torch {

// A strategy built for one replay.
struct replay_twin {
  resource_chain chain;
  memory_resource& top() const { return chain.top(); }
};

// The strategies the report replays, in the registry's order: the device strategies (not host
// memory) with the address_only flag.
const std::vector<std::string>& replayed_strategies();

// `name` (one of replayed_strategies()) capped at `capacity_bytes`; with the options of `configured`
// where it is the same strategy (the process's own settings), else the defaults. Throws
// invalid_argument for another name.
replay_twin make_replay_twin(const std::string& name, std::uint64_t capacity_bytes, const chain_spec* configured);

}  // namespace gpumem::torch
