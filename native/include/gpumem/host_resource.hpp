// Plain host memory, 256-byte aligned. A real strategy: it lets the framework, the pool's logic and
// the trainer's CPU path run on machines with no GPU.
#pragma once
#include "gpumem/detail/allocation_table.hpp"
#include "gpumem/memory_resource.hpp"

namespace gpumem {

class host_resource final : public memory_resource {
 public:
  static constexpr std::size_t alignment = 256;
  host_resource() = default;
  ~host_resource() override;

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) override;
  resource_stats do_stats() const override { return table_.stats(); }
  void do_reset_peak() override { table_.reset_peak(); }
  std::size_t do_allocation_size(const void* ptr) const override { return table_.size_of(ptr); }
  memory_kind do_kind() const noexcept override { return memory_kind::host; }
  int do_device() const noexcept override { return -1; }

  detail::allocation_table table_;
};

}  // namespace gpumem
