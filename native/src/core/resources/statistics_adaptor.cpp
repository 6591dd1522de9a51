#include "gpumem/statistics_adaptor.hpp"

namespace gpumem {

void* statistics_adaptor::do_allocate(std::size_t bytes, stream_handle stream) {
  void* ptr = nullptr;
  try {
    ptr = upstream().allocate(bytes, stream);
  } catch (const out_of_memory&) {
    std::lock_guard<std::mutex> lock(mutex_);
    counter_.on_oom();
    throw;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  counter_.on_allocate(bytes);
  return ptr;
}

void statistics_adaptor::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
  upstream().deallocate(ptr, bytes, stream);
  std::lock_guard<std::mutex> lock(mutex_);
  counter_.on_deallocate(bytes);
}

resource_stats statistics_adaptor::do_stats() const {
  resource_stats up = upstream().stats();
  std::lock_guard<std::mutex> lock(mutex_);
  const resource_stats& mine = counter_.get();
  up.allocated_bytes = mine.allocated_bytes;
  up.peak_allocated_bytes = mine.peak_allocated_bytes;
  up.alloc_count = mine.alloc_count;
  up.free_count = mine.free_count;
  up.oom_count = mine.oom_count;
  return up;
}

void statistics_adaptor::do_reset_peak() {
  upstream().reset_peak();
  std::lock_guard<std::mutex> lock(mutex_);
  counter_.reset_peak();
}

}  // namespace gpumem
