#include "gpumem/tracking_adaptor.hpp"

namespace gpumem {

tracking_adaptor::tracking_adaptor(memory_resource& upstream, std::size_t capacity)
    : adaptor_base(upstream), start_(std::chrono::steady_clock::now()), ring_(capacity == 0 ? 1 : capacity) {}

void tracking_adaptor::push(action a, const void* ptr, std::size_t bytes, stream_handle stream) {
  auto now = std::chrono::steady_clock::now();
  const std::uint64_t reserved = upstream().stats().reserved_bytes;
  tracking_event e{static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - start_).count()),
                   static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(ptr)),
                   bytes,
                   static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(stream)),
                   reserved,
                   tag(),
                   a};
  std::lock_guard<std::mutex> lock(mutex_);
  ring_[next_] = e;
  next_ = (next_ + 1) % ring_.size();
  if (count_ < ring_.size()) ++count_;
  else ++dropped_;
}

void* tracking_adaptor::do_allocate(std::size_t bytes, stream_handle stream) {
  void* ptr = nullptr;
  try {
    ptr = upstream().allocate(bytes, stream);
  } catch (const out_of_memory&) {
    if (enabled()) push(oom_action, nullptr, bytes, stream);
    throw;
  }
  if (enabled()) push(allocate_action, ptr, bytes, stream);
  return ptr;
}

void tracking_adaptor::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
  upstream().deallocate(ptr, bytes, stream);  // only successful frees are recorded
  if (enabled()) push(free_action, ptr, bytes, stream);
}

std::vector<tracking_event> tracking_adaptor::events(bool clear) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<tracking_event> out;
  out.reserve(count_);
  std::size_t first = (next_ + ring_.size() - count_) % ring_.size();
  for (std::size_t i = 0; i < count_; ++i) out.push_back(ring_[(first + i) % ring_.size()]);
  if (clear) {
    count_ = 0;
    next_ = 0;
  }
  return out;
}

std::uint64_t tracking_adaptor::dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

}  // namespace gpumem
