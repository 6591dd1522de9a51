// Strategy 'uvm''s leaf: cudaMallocManaged (unified memory) with cudaMemAdvise hints (its options
// struct, uvm_spec, and its descriptor, uvm_strategy(), beside it). Prefetch moves pages to the device
// or back to the host with CUDA 13's cudaMemLocation form. Prefetch-on-allocate is not done here:
// it is the prefetch_adaptor's job, so it composes with any managed upstream.
#pragma once
#include "gpumem/detail/allocation_table.hpp"
#include "gpumem/memory_resource.hpp"

namespace gpumem {

// The targets of the advice: the device or the host, or automatic for no hint (the option value "none").
struct managed_options {
  placement_choice preferred_location = placement_choice::automatic;  // cudaMemAdviseSetPreferredLocation
  placement_choice accessed_by = placement_choice::automatic;         // cudaMemAdviseSetAccessedBy
  bool read_mostly = false;                                 // cudaMemAdviseSetReadMostly
};

class uvm_resource final : public detail::leaf_resource {
 public:
  explicit uvm_resource(int device = 0, managed_options options = {});
  ~uvm_resource() override;
  const managed_options& options() const noexcept { return options_; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) override;
  bool do_prefetch(void* ptr, std::size_t bytes, placement to, stream_handle stream) override;
  memory_kind do_kind() const noexcept override { return memory_kind::managed; }
  int do_device() const noexcept override { return device_; }

  int device_;
  managed_options options_;
};

// Strategy 'uvm' (its options in a chain_spec: spec.options<uvm_spec>()).
struct uvm_spec {
  bool prefetch_on_allocate = true;
  managed_options advice;
};

}  // namespace gpumem
