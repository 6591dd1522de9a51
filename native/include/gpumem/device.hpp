// Devices, streams, events and copies: the CUDA runtime calls the rest of the framework needs,
// with host fallbacks where no CUDA device exists.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "gpumem/stream.hpp"

namespace gpumem {

// Whether this build has the CUDA strategies.
bool built_with_cuda() noexcept;

// Number of CUDA devices; 0 when the build has no CUDA, there is no driver or no device. Never throws.
int device_count() noexcept;
// Why device_count() is 0 (empty when devices exist), e.g. "CUDA driver version is insufficient".
std::string device_status();

int driver_version() noexcept;   // e.g. 13000; 0 when unknown

struct device_properties {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  std::uint64_t total_memory = 0;
  int multiprocessors = 0;
  bool managed_memory = false;
  bool concurrent_managed_access = false;
  bool memory_pools = false;
  int pci_bus_id = 0;
  std::uint64_t l2_cache_bytes = 0;
};
device_properties get_device_properties(int device);

struct memory_info {
  std::uint64_t free_bytes = 0;
  std::uint64_t total_bytes = 0;
};
memory_info get_memory_info(int device);

stream_handle create_stream(int device);  // non-blocking stream
// Synchronises the stream, tells the stream observers (stream_ordering.hpp) it is going away, then
// destroys it. nullptr (the default stream) is left alone.
void destroy_stream(stream_handle stream) noexcept;
void synchronize_stream(stream_handle stream);
void synchronize_device(int device);
// Makes `device` the calling thread's current device (cudaSetDevice): kernels and cuBLAS launch on the
// current device, so a process whose work is all on one device (a rank) makes it current first.
void set_current_device(int device);

void* create_event(int device);  // with timing
void destroy_event(void* event) noexcept;
void record_event(void* event, stream_handle stream);
void synchronize_event(void* event);
bool query_event(void* event);
float elapsed_ms(void* start, void* end);

// CUDA Graphs: record the work queued on `stream` between begin_capture and end_capture (in
// relaxed mode, so allocators may still be called), and replay it with one launch. end_capture
// always ends the capture, also when something inside it failed; it returns an executable graph.
void begin_capture(stream_handle stream);
void* end_capture(stream_handle stream);
void launch_graph(void* graph_exec, stream_handle stream);
void destroy_graph(void* graph_exec) noexcept;

// Copies between host memory and memory of `kind`, ordered after work on `stream`, and waits for
// the copy: the host buffer can be reused when it returns.
void copy_to(void* dst, memory_kind dst_kind, const void* src, std::size_t bytes, stream_handle stream);
void copy_from(void* dst, const void* src, memory_kind src_kind, std::size_t bytes, stream_handle stream);

// Whether a shared library can be loaded with dlopen (e.g. "libcublas.so.13"); error text if not.
bool can_load_library(const std::string& name, std::string* error);

}  // namespace gpumem
