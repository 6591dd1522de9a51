#include "gpumem/limiting_adaptor.hpp"

#include <string>

#include "budget_rules.hpp"

namespace gpumem {

void* limiting_adaptor::do_allocate(std::size_t bytes, stream_handle stream) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string why = detail::over_limit(bytes, used_, limit_);
    if (!why.empty()) {
      ++oom_count_;
      resource_stats s = upstream_.stats();
      s.oom_count += oom_count_;
      throw out_of_memory("limiting_adaptor: " + why, bytes, s);
    }
    used_ += bytes;
  }
  try {
    return upstream_.allocate(bytes, stream);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    used_ -= bytes;  // roll the accounting back: the upstream kept nothing
    throw;
  }
}

void limiting_adaptor::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
  upstream_.deallocate(ptr, bytes, stream);  // validates first; throws without changing anything
  std::lock_guard<std::mutex> lock(mutex_);
  used_ -= bytes;
}

resource_stats limiting_adaptor::do_stats() const {
  resource_stats s = upstream_.stats();
  std::lock_guard<std::mutex> lock(mutex_);
  s.oom_count += oom_count_;
  return s;
}

}  // namespace gpumem
