// Caps the bytes an upstream may hand out ("pretend this GPU has 8 GiB"). Requests past the cap
// fail with out_of_memory before the upstream is asked. Holds a non-owning upstream.
#pragma once
#include <mutex>

#include "gpumem/memory_resource.hpp"

namespace gpumem {

class limiting_adaptor final : public memory_resource {
 public:
  limiting_adaptor(memory_resource& upstream, std::size_t limit_bytes)
      : upstream_(upstream), limit_(limit_bytes) {}

  memory_resource& upstream() const noexcept { return upstream_; }
  std::size_t limit() const noexcept { return limit_; }
  std::size_t used() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return used_;
  }

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) override;
  bool do_prefetch(void* ptr, std::size_t bytes, placement to, stream_handle stream) override {
    return upstream_.prefetch(ptr, bytes, to, stream);
  }
  void do_record_stream(void* ptr, stream_handle stream) override { upstream_.record_stream(ptr, stream); }
  resource_stats do_stats() const override;
  void do_reset_peak() override { upstream_.reset_peak(); }
  void do_trim(std::size_t keep) override { upstream_.trim(keep); }
  std::size_t do_allocation_size(const void* ptr) const override { return upstream_.allocation_size(ptr); }
  memory_kind do_kind() const noexcept override { return upstream_.kind(); }
  int do_device() const noexcept override { return upstream_.device(); }

  memory_resource& upstream_;
  std::size_t limit_;
  mutable std::mutex mutex_;
  std::size_t used_ = 0;
  std::uint64_t oom_count_ = 0;
};

}  // namespace gpumem
