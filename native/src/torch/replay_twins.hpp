// Address-only twins of the device strategies, for the out-of-memory report's replay
// (oom_report.hpp): the strategy's own logic (pool_resource, expandable_resource) over a leaf that
// hands out addresses and counts bytes but backs them with nothing, capped at a capacity by the
// core's limiting layers. The replay runs inside the process whose allocation just failed, possibly
// at tens of GiB: the host twins (host_resource, the mmap physical memory) would commit host memory
// for it, these take none. No address they return may be read or written. Host code, no CUDA.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpumem/chain_builder.hpp"
#include "gpumem/memory_resource.hpp"

namespace gpumem::torch {

// A strategy built for one replay: its layers, the top one last.
struct replay_twin {
  std::vector<std::unique_ptr<memory_resource>> layers;  // bottom first; destroyed top first
  memory_resource& top() const { return *layers.back(); }
  replay_twin() = default;
  replay_twin(replay_twin&&) = default;
  replay_twin& operator=(replay_twin&&) = default;
  ~replay_twin();
};

// The strategies the report replays, in the order it names them: PyTorch's default caching
// allocator's model ('pool') and the virtual-memory one ('expandable').
const std::vector<std::string>& replayed_strategies();

// `name` (one of replayed_strategies()) capped at `capacity_bytes`; with the options of
// `configured` where it is the same strategy (the process's own settings), else the defaults.
// Throws invalid_argument for another name.
replay_twin make_replay_twin(const std::string& name, std::uint64_t capacity_bytes, const chain_spec* configured);

}  // namespace gpumem::torch
