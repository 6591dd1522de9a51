// Prefetch-on-allocate: every allocation is prefetched to the device on the allocating stream, so
// the first kernel that touches it does not fault its pages in one by one. Over an upstream with
// nothing to move (plain device memory) it changes nothing.
#pragma once
#include "gpumem/adaptor.hpp"

namespace gpumem {

class prefetch_adaptor final : public adaptor_base {
 public:
  using adaptor_base::adaptor_base;

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
};

}  // namespace gpumem
