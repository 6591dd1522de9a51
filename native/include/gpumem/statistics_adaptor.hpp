// Counts what callers hold at this level (allocated, peak, calls, OOMs) over any upstream, for
// resources that keep no statistics of their own (a C++ plug-in strategy, say). Reserved bytes and
// upstream calls are the upstream's.
#pragma once
#include <mutex>

#include "gpumem/adaptor.hpp"

namespace gpumem {

class statistics_adaptor final : public adaptor_base {
 public:
  using adaptor_base::adaptor_base;

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) override;
  resource_stats do_stats() const override;
  void do_reset_peak() override;

  mutable std::mutex mutex_;
  stats_counter counter_;
};

}  // namespace gpumem
