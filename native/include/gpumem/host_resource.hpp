// Plain host memory, 256-byte aligned. A real strategy: it lets the framework, the pool's logic and
// the trainer's CPU path run on machines with no GPU.
#pragma once
#include "gpumem/detail/allocation_table.hpp"
#include "gpumem/memory_resource.hpp"

namespace gpumem {

class host_resource final : public detail::leaf_resource {
 public:
  static constexpr std::size_t alignment = 256;
  host_resource() = default;
  ~host_resource() override;

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) override;
  memory_kind do_kind() const noexcept override { return memory_kind::host; }
  int do_device() const noexcept override { return -1; }

};

}  // namespace gpumem
