// The seed's allocator library (uvm_allocator.so) under its own names (gpumem_torch_trace.h): thin
// forwards to gpumem_malloc / gpumem_free / gpumem_stats / gpumem_reset_peak, so the strategy, the
// statistics, the error handling and the trace are the library's own.
#include <string>

#include "gpumem_torch_trace.h"
#include "trace_capture.hpp"

namespace {

// The loops below end on an out-of-range device, which sets gpumem_last_error; the caller's
// message is put back.
struct keep_last_error {
  std::string saved;
  keep_last_error() {
    try {
      saved = gpumem_last_error();
    } catch (...) {
    }
  }
  ~keep_last_error() { gpumem::torch::set_last_error(saved); }
};

// gpumem_stats of every device in range, summed. Devices whose strategy does not exist yet report
// zeros; the loop ends at the first index gpumem_stats rejects.
template <class Field>
std::uint64_t sum_over_devices(Field field) {
  keep_last_error keep;
  std::uint64_t total = 0;
  for (int device = 0;; ++device) {
    gpumem_torch_stats s{};
    if (gpumem_stats(device, &s) != GPUMEM_TORCH_OK) break;
    if (s.active != 0) total += field(s);
  }
  return total;
}

}  // namespace

extern "C" {

// Not noexcept, as gpumem_malloc: under GPUMEM_OOM=raise a failure is thrown to PyTorch.
GPUMEM_TORCH_API void* uvm_malloc(ssize_t size, int device, gpumem_stream_t stream) {
  return gpumem_malloc(size, device, stream);
}

GPUMEM_TORCH_API void uvm_free(void* ptr, ssize_t size, int device, gpumem_stream_t stream) {
  gpumem_free(ptr, size, device, stream);
}

GPUMEM_TORCH_API size_t uvm_get_allocated_bytes(void) {
  return static_cast<size_t>(sum_over_devices([](const gpumem_torch_stats& s) { return s.allocated_bytes; }));
}

GPUMEM_TORCH_API size_t uvm_get_peak_allocated_bytes(void) {
  return static_cast<size_t>(sum_over_devices([](const gpumem_torch_stats& s) { return s.peak_allocated_bytes; }));
}

GPUMEM_TORCH_API uint64_t uvm_get_num_allocs(void) {
  return sum_over_devices([](const gpumem_torch_stats& s) { return s.alloc_count; });
}

GPUMEM_TORCH_API uint64_t uvm_get_num_frees(void) {
  return sum_over_devices([](const gpumem_torch_stats& s) { return s.free_count; });
}

GPUMEM_TORCH_API void uvm_reset_peak_stats(void) {
  keep_last_error keep;
  for (int device = 0; gpumem_reset_peak(device) != GPUMEM_TORCH_ERR_DEVICE; ++device) {
  }
}

}  // extern "C"
