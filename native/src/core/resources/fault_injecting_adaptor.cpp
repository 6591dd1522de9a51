#include "gpumem/fault_injecting_adaptor.hpp"

#include <string>

#include "budget_rules.hpp"

namespace gpumem {

std::uint64_t fault_injecting_adaptor::attempts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return attempts_;
}

std::uint64_t fault_injecting_adaptor::injected_failures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return injected_;
}

std::uint64_t fault_injecting_adaptor::held_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_;
}

void* fault_injecting_adaptor::do_allocate(std::size_t bytes, stream_handle stream) {
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reason = detail::injected_fault(options_, ++attempts_, bytes, held_, "allocation");
    if (reason.empty()) {
      held_ += bytes;
    } else {
      ++injected_;
    }
  }
  if (!reason.empty()) inject(bytes, reason);
  try {
    return upstream().allocate(bytes, stream);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    held_ -= bytes;  // the upstream kept nothing
    throw;
  }
}

void fault_injecting_adaptor::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
  upstream().deallocate(ptr, bytes, stream);  // validates first; throws without changing anything
  std::lock_guard<std::mutex> lock(mutex_);
  held_ -= bytes;
}

resource_stats fault_injecting_adaptor::do_stats() const {
  resource_stats s = upstream().stats();
  std::lock_guard<std::mutex> lock(mutex_);
  s.oom_count += injected_;
  return s;
}

void fault_injecting_adaptor::inject(std::size_t bytes, const std::string& reason) {
  throw out_of_memory("fault_injecting_adaptor: injected out-of-memory: " + reason, bytes, do_stats());
}

}  // namespace gpumem
