// Replays an allocation trace through a resource in a native loop: no JavaScript and no kernels
// between calls, so the times are those of the strategy itself.
//
// A trace is compiled (in TypeScript) into a program of operations on "slots": an allocation puts
// its pointer in a slot, a free takes it back out. Slots are reused once freed, so the slot table
// is as large as the most allocations the trace holds at once.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpumem/memory_resource.hpp"

namespace gpumem::bench {

enum class replay_action : std::uint8_t { allocate = 0, deallocate = 1 };

struct replay_op {
  replay_action action;
  std::uint32_t slot;
  std::uint64_t bytes;  // > 0; a free uses the size its slot was allocated with
  stream_handle stream;
};

// One pass over the program. Each pass starts with the resource trimmed and its peaks reset, and
// ends by freeing what the trace left live (untimed).
struct replay_pass {
  double alloc_ns = 0;             // summed over the successful allocations, clock cost removed
  double free_ns = 0;              // summed over the frees, clock cost removed
  std::uint64_t allocs = 0;        // successful allocations
  std::uint64_t frees = 0;         // frees made
  std::uint64_t ooms = 0;          // allocations that ended in out_of_memory or bad_alloc (not timed)
  std::uint64_t skipped_frees = 0; // frees of a slot whose allocation hit out_of_memory
  bool stopped = false;            // the pass stopped at its first out-of-memory (stop_at_first_oom)
  resource_stats end;              // stats at the end of the trace, before the cleanup frees
};

struct replay_result {
  std::vector<replay_pass> passes;
  double clock_overhead_ns = 0;  // the cost of one clock read, subtracted from every call
};

// Checks a program before anything is allocated: every slot < slots, an allocation only into an
// empty slot, a free only of a slot allocated earlier in the program, bytes > 0. Throws
// invalid_argument naming the operation's index.
void validate_replay(const std::vector<replay_op>& ops, std::size_t slots);

// How a replay runs.
struct replay_options {
  int repeats = 1;  // passes (at least one)
  // End each pass at its first out-of-memory (ooms is then 0 or 1): for a caller that only asks
  // whether the program fits, so that a program whose requests nearly all fail costs one failure,
  // not one per request (a failure costs what the strategy's retry costs: freeing its cache, a
  // driver call).
  bool stop_at_first_oom = false;
};

// Validates, then runs the program `options.repeats` times (at least once), then trims the
// resource. An allocation that throws out_of_memory or std::bad_alloc (the host's own memory or
// address space ran out) is counted as an out-of-memory failure and its slot stays empty (or the
// pass ends there, with stop_at_first_oom); any other error frees what the pass holds and is rethrown.
replay_result replay(memory_resource& resource, const std::vector<replay_op>& ops, std::size_t slots, const replay_options& options);

}  // namespace gpumem::bench
