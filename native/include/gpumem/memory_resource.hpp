// The base of every strategy: a non-virtual public interface over private virtuals (the RMM
// pattern), so that checks and hooks have one place to live and subclasses implement one overload
// of each operation.
#pragma once
#include <cstddef>

#include "gpumem/errors.hpp"
#include "gpumem/stats.hpp"
#include "gpumem/stream.hpp"

namespace gpumem {

class memory_resource {
 public:
  memory_resource() = default;
  virtual ~memory_resource() = default;
  memory_resource(const memory_resource&) = delete;
  memory_resource& operator=(const memory_resource&) = delete;

  // Returns memory for `bytes` (> 0) usable in stream order on `stream`. Throws out_of_memory when
  // the request cannot be met, invalid_argument for bytes == 0.
  void* allocate(std::size_t bytes, stream_handle stream = nullptr) {
    if (bytes == 0) throw_zero_size();
    return do_allocate(bytes, stream);
  }

  // Gives back memory from allocate(). Work already queued on `stream` may still use it. Throws
  // invalid_argument (and changes nothing) for a pointer this resource does not hold or a size that
  // differs from the one it was allocated with.
  void deallocate(void* ptr, std::size_t bytes, stream_handle stream = nullptr) {
    do_deallocate(ptr, bytes, stream);
  }

  // Moves pages of managed memory towards `to`. Returns false where there is nothing to move.
  bool prefetch(void* ptr, std::size_t bytes, placement to, stream_handle stream = nullptr) {
    return do_prefetch(ptr, bytes, to, stream);
  }

  // Marks `ptr` as used on `stream` as well (PyTorch's record_stream): its memory is not reused
  // until the work queued on `stream` before the deallocation has finished.
  void record_stream(void* ptr, stream_handle stream) { do_record_stream(ptr, stream); }

  resource_stats stats() const { return do_stats(); }
  void reset_peak() { do_reset_peak(); }

  // Gives cached memory back to the upstream, keeping at most `bytes_to_keep` reserved where the
  // strategy can choose. Memory callers hold is never touched.
  void trim(std::size_t bytes_to_keep = 0) { do_trim(bytes_to_keep); }

  // Size of the live allocation starting at ptr, or 0 if ptr starts none. Used to check copies.
  std::size_t allocation_size(const void* ptr) const { return do_allocation_size(ptr); }

  memory_kind kind() const noexcept { return do_kind(); }
  // The CUDA device the memory belongs to; -1 for host memory.
  int device() const noexcept { return do_device(); }

 private:
  virtual void* do_allocate(std::size_t bytes, stream_handle stream) = 0;
  virtual void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) = 0;
  virtual bool do_prefetch(void*, std::size_t, placement, stream_handle) { return false; }
  virtual void do_record_stream(void*, stream_handle) {}
  virtual resource_stats do_stats() const = 0;
  virtual void do_reset_peak() = 0;
  virtual void do_trim(std::size_t) {}
  virtual std::size_t do_allocation_size(const void* ptr) const = 0;
  virtual memory_kind do_kind() const noexcept = 0;
  virtual int do_device() const noexcept = 0;
};

}  // namespace gpumem
