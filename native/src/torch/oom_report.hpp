// "Is this OOM real?", answered where the allocation failed: the figures of the failure, a verdict in
// the vocabulary of `gpumem doctor` (docs/traces.md), and, from the event ring (oom_ring.hpp), whether
// another strategy would have served the request: the blocks live at the window's start, the
// window's events and the failed request replayed natively on address-only twins (replay_twins.hpp)
// capped at the capacity, within a time bound. Host code, no CUDA: the caller reads the device's
// figures and passes them in.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config.hpp"  // default_oom_window, default_oom_replay_ms
#include "gpumem/chain_builder.hpp"
#include "oom_ring.hpp"

namespace gpumem::torch {

// What the caller knows at the failure.
struct oom_context {
  std::string strategy;            // the strategy that failed
  const chain_spec* configured = nullptr;  // its options (the replay of the same strategy uses them)
  int instance = 0;                // the allocator instance (0: the environment's)
  int device = 0;
  std::uint64_t request_bytes = 0;
  std::uintptr_t request_stream = 0;
  std::uint64_t live_bytes = 0;    // allocated
  std::uint64_t reserved_bytes = 0;
  std::int64_t largest_free_block = -1;  // -1: the strategy does not say
  // What this allocator could have reached: 0 where it is not known.
  std::uint64_t capacity_bytes = 0;
  std::string capacity_source;     // how it was found, e.g. "reserved + the driver's free bytes"
  std::uint64_t window = default_oom_window;  // GPUMEM_OOM_WINDOW (0: the ring is off)
  std::uint64_t replay_ms = default_oom_replay_ms;  // GPUMEM_OOM_REPLAY_MS (0: no replay)
};

// 'real': the live bytes and the request exceed the capacity, no allocator can serve it;
// 'fragmentation': they fit in it, this allocator could not place the request;
// 'unknown': the capacity is not known.
enum class oom_verdict { real, fragmentation, unknown };
const char* verdict_name(oom_verdict v) noexcept;

// One strategy's replay.
struct replay_outcome {
  std::string strategy;
  bool finished = false;            // false: the time bound stopped it, or it could not be built
  bool fits = false;                // finished with no out-of-memory failure, the request included
  bool request_fits = false;        // the failed request itself was served
  std::uint64_t ooms = 0;           // failures during the replay
  std::uint64_t peak_reserved_bytes = 0;
  std::string error;                // it could not be built or replayed
};

struct oom_report {
  oom_context context;
  oom_verdict verdict = oom_verdict::unknown;
  bool replayed = false;
  std::string skip_reason;          // set when replayed is false
  std::uint64_t window_events = 0;  // events replayed
  std::uint64_t live_blocks = 0;    // blocks live at the window's start, seeded first
  std::uint64_t live_block_bytes = 0;
  std::uint64_t recorded_events = 0;  // since the ring was made
  double replay_ms = 0;
  std::vector<replay_outcome> strategies;
  std::vector<std::string> not_replayed;  // "async: why", ...

  // The sentences appended to the out-of-memory message (after its figures).
  std::string text() const;
  // The whole report as one JSON object (gpumem_last_oom_report).
  std::string json() const;
};

// Builds the report. `window` is the ring's snapshot, or nullptr when the ring is off or its copy
// failed. Throws only std::bad_alloc.
oom_report make_oom_report(const oom_context& context, const ring_window* window);

}  // namespace gpumem::torch
