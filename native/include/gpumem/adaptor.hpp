// The shared shape of an adaptor: holds a non-owning upstream, exposes it, forwards everything
// it does not change. Subclasses override what they add.
#pragma once
#include "gpumem/memory_resource.hpp"

namespace gpumem {

class adaptor_base : public memory_resource {
 public:
  explicit adaptor_base(memory_resource& upstream) : upstream_(upstream) {}
  memory_resource& upstream() const noexcept { return upstream_; }

 protected:
  void* do_allocate(std::size_t bytes, stream_handle stream) override { return upstream_.allocate(bytes, stream); }
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) override {
    upstream_.deallocate(ptr, bytes, stream);
  }
  bool do_prefetch(void* ptr, std::size_t bytes, placement to, stream_handle stream) override {
    return upstream_.prefetch(ptr, bytes, to, stream);
  }
  void do_record_stream(void* ptr, stream_handle stream) override { upstream_.record_stream(ptr, stream); }
  resource_stats do_stats() const override { return upstream_.stats(); }
  void do_reset_peak() override { upstream_.reset_peak(); }
  void do_trim(std::size_t keep) override { upstream_.trim(keep); }
  std::size_t do_allocation_size(const void* ptr) const override { return upstream_.allocation_size(ptr); }
  memory_kind do_kind() const noexcept override { return upstream_.kind(); }
  int do_device() const noexcept override { return upstream_.device(); }

 private:
  memory_resource& upstream_;
};

}  // namespace gpumem
