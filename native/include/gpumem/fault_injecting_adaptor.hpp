// Makes allocations fail on purpose, to test what sits above an upstream when memory runs out:
// every Nth allocation (`fail_every`), and/or any allocation that would take the bytes held
// through this layer past a budget (`fail_after_bytes`). A failure is the same out_of_memory a
// leaf throws (request size and a stats snapshot), so the pool's release-and-retry, the bindings'
// error translation and the trainer's cleanup meet it exactly as they would a real one.
// Deallocations pass straight through. Holds a non-owning upstream; thread-safe.
#pragma once
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>

#include "gpumem/adaptor.hpp"

namespace gpumem {

struct fault_options {
  // Attempt k (counting from 1, every allocation through this layer) fails when k is a multiple
  // of fail_every. 0: off.
  std::uint64_t fail_every = 0;
  // An allocation fails when the bytes held through this layer would exceed this. The default
  // (the largest value) is off; 0 makes every allocation fail.
  std::uint64_t fail_after_bytes = std::numeric_limits<std::uint64_t>::max();
};

class fault_injecting_adaptor final : public adaptor_base {
 public:
  fault_injecting_adaptor(memory_resource& upstream, fault_options options)
      : adaptor_base(upstream), options_(options) {}

  const fault_options& options() const noexcept { return options_; }
  // Allocations asked of this layer, failed ones included.
  std::uint64_t attempts() const;
  // Allocations this layer failed on purpose (failures of the upstream itself are not counted).
  std::uint64_t injected_failures() const;
  // Bytes currently held through this layer (requested sizes).
  std::uint64_t held_bytes() const;

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) override;
  resource_stats do_stats() const override;
  [[noreturn]] void inject(std::size_t bytes, const std::string& reason);

  fault_options options_;
  mutable std::mutex mutex_;
  std::uint64_t attempts_ = 0;
  std::uint64_t injected_ = 0;
  std::uint64_t held_ = 0;
};

}  // namespace gpumem
