// Address-only memory: a leaf that hands out addresses and counts bytes but backs them with
// nothing, and a VMM (gpumem/vmm.hpp) whose ranges and allocations map nothing. A strategy whose logic never
// reads or writes its memory (a cache keyed by addresses, granules mapped into ranges) runs over
// them exactly as over the driver's memory, taking none: a replay that asks "does this trace fit
// in N bytes with this strategy?" then answers the same on any machine, whatever the host's memory
// or address-space limit (ulimit -v) and however large the trace's requests. The chain builder puts
// one under a strategy whose descriptor has the address_only flag when chain_spec::address_only is
// set; libgpumem_torch's out-of-memory replay (torch/replay_twins.cpp) builds over them too.
//
// Addresses start at 2^44, far from what the host maps, so that a bug that did touch one would
// fault rather than corrupt; each range is 2 MiB-aligned and never handed out again.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "gpumem/memory_resource.hpp"
#include "gpumem/vmm.hpp"

namespace gpumem {

// A leaf of host kind (device -1) whose allocations are addresses with nothing behind them. Throws
// out_of_memory only when the address space itself is spent.
std::unique_ptr<memory_resource> make_address_only_resource();

// A VMM of `granule_bytes` granules (a power of two, at least 4 KiB) that reserves address ranges
// and creates and maps nothing; total_bytes() is `total_bytes` (0: unknown, as on the host).
std::unique_ptr<vmm> make_address_only_vmm(std::size_t granule_bytes, std::uint64_t total_bytes);

}  // namespace gpumem
