#include "gpumem/replay.hpp"

#include <algorithm>
#include <chrono>
#include <new>
#include <string>

namespace gpumem::bench {
namespace {

using clock_type = std::chrono::steady_clock;

double ns_between(clock_type::time_point a, clock_type::time_point b) {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

// The cost of one clock read in the chained timing below: median over a few runs.
double clock_overhead_ns() {
  constexpr int reads = 20000;
  std::vector<double> samples;
  for (int r = 0; r < 5; ++r) {
    auto start = clock_type::now();
    auto last = start;
    for (int i = 0; i < reads; ++i) last = clock_type::now();
    samples.push_back(ns_between(start, last) / reads);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

[[noreturn]] void bad_op(std::size_t index, const std::string& what) {
  throw invalid_argument(invalid_argument::kind::range, "ops",
                         "Expected a valid replay program but operation " + std::to_string(index) + " " + what);
}

// The live allocations of a pass; frees whatever is left when the pass ends or fails.
class slot_table {
 public:
  slot_table(memory_resource& resource, std::size_t slots)
      : resource_(resource), ptr_(slots, nullptr), bytes_(slots, 0), stream_(slots, nullptr) {}
  slot_table(const slot_table&) = delete;
  slot_table& operator=(const slot_table&) = delete;
  ~slot_table() { release_all(); }

  void*& ptr(std::uint32_t slot) { return ptr_[slot]; }
  std::uint64_t& bytes(std::uint32_t slot) { return bytes_[slot]; }
  stream_handle& stream(std::uint32_t slot) { return stream_[slot]; }

  void release_all() noexcept {
    for (std::size_t i = 0; i < ptr_.size(); ++i) {
      if (ptr_[i] == nullptr) continue;
      try {
        resource_.deallocate(ptr_[i], bytes_[i], stream_[i]);
      } catch (...) {
        // a failed free during cleanup leaves that block to the resource's own dispose
      }
      ptr_[i] = nullptr;
    }
  }

 private:
  memory_resource& resource_;
  std::vector<void*> ptr_;
  std::vector<std::uint64_t> bytes_;
  std::vector<stream_handle> stream_;  // where each block was allocated, and is freed at cleanup
};

replay_pass run_pass(memory_resource& resource, const std::vector<replay_op>& ops, std::size_t slots, double overhead,
                     bool stop_at_first_oom) {
  resource.trim(0);
  resource.reset_peak();
  slot_table table(resource, slots);
  replay_pass pass;
  auto last = clock_type::now();
  for (const replay_op& op : ops) {
    if (stop_at_first_oom && pass.ooms > 0) {
      pass.stopped = true;
      break;
    }
    if (op.action == replay_action::allocate) {
      try {
        table.ptr(op.slot) = resource.allocate(op.bytes, op.stream);
        table.bytes(op.slot) = op.bytes;
        table.stream(op.slot) = op.stream;
        auto now = clock_type::now();
        pass.alloc_ns += ns_between(last, now);
        ++pass.allocs;
        last = now;
      } catch (const out_of_memory&) {
        ++pass.ooms;
        last = clock_type::now();
      } catch (const std::bad_alloc&) {
        // The host ran out (its bookkeeping, or an address-space limit such as RLIMIT_AS): for the
        // trace this allocation failed as any other out of memory does; the resource is unchanged.
        ++pass.ooms;
        last = clock_type::now();
      }
    } else {
      void* p = table.ptr(op.slot);
      if (p == nullptr) {
        ++pass.skipped_frees;
        continue;
      }
      resource.deallocate(p, table.bytes(op.slot), op.stream);
      table.ptr(op.slot) = nullptr;
      auto now = clock_type::now();
      pass.free_ns += ns_between(last, now);
      ++pass.frees;
      last = now;
    }
  }
  pass.end = resource.stats();
  table.release_all();
  pass.alloc_ns = std::max(0.0, pass.alloc_ns - overhead * static_cast<double>(pass.allocs));
  pass.free_ns = std::max(0.0, pass.free_ns - overhead * static_cast<double>(pass.frees));
  return pass;
}

}  // namespace

void validate_replay(const std::vector<replay_op>& ops, std::size_t slots) {
  std::vector<bool> live(slots, false);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const replay_op& op = ops[i];
    if (op.slot >= slots) bad_op(i, "uses slot " + std::to_string(op.slot) + " of " + std::to_string(slots));
    if (op.action == replay_action::allocate) {
      if (op.bytes == 0) bad_op(i, "allocates 0 bytes");
      if (live[op.slot]) bad_op(i, "allocates into slot " + std::to_string(op.slot) + ", which is still live");
      live[op.slot] = true;
    } else if (op.action == replay_action::deallocate) {
      if (!live[op.slot]) bad_op(i, "frees slot " + std::to_string(op.slot) + ", which holds no allocation");
      live[op.slot] = false;
    } else {
      bad_op(i, "has action " + std::to_string(static_cast<int>(op.action)) + " (expected 0 allocate or 1 free)");
    }
  }
}

replay_result replay(memory_resource& resource, const std::vector<replay_op>& ops, std::size_t slots, const replay_options& options) {
  validate_replay(ops, slots);
  replay_result result;
  result.clock_overhead_ns = clock_overhead_ns();
  for (int r = 0; r < std::max(options.repeats, 1); ++r)
    result.passes.push_back(run_pass(resource, ops, slots, result.clock_overhead_ns, options.stop_at_first_oom));
  // What the strategy caches goes back before the caller builds its records: a replay that ran the
  // host to its limit leaves room for them (the next pass would trim first anyway).
  try {
    resource.trim(0);
  } catch (...) {
    // a failed trim leaves the cache to the resource's own dispose
  }
  return result;
}

}  // namespace gpumem::bench
