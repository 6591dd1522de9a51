#include "workspace.hpp"

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cublas_loader.hpp"
#include "gpumem/errors.hpp"

namespace gpumem::ops {
namespace {

struct registry {
  std::mutex mutex;
  // Host and device streams apart: a host stream's handle may equal a CUDA stream's.
  std::unordered_map<stream_handle, workspace::binding> device;
  std::unordered_map<stream_handle, workspace::binding> host;
  std::atomic<std::uint64_t> unbound{0};
};

registry& reg() {
  static registry r;
  return r;
}

std::string stream_name(stream_handle s) { return format_pointer(s); }

void check_part(void* ptr, std::size_t bytes, std::size_t needed, const char* ptr_name, const char* bytes_name) {
  if (bytes < needed) {
    throw invalid_argument(invalid_argument::kind::range, bytes_name,
                           std::string("Expected at least ") + std::to_string(needed) + " for " + bytes_name +
                               " (ops.workspaceBytes) but received " + std::to_string(bytes));
  }
  if (ptr == nullptr && bytes > 0) {
    throw invalid_argument(invalid_argument::kind::type, ptr_name,
                           std::string("Expected a pointer (positive integer) for ") + ptr_name + " with " + bytes_name +
                               " " + std::to_string(bytes) + " but received 0");
  }
}

}  // namespace

workspace_sizes workspace_bytes(bool on_device) {
  workspace_sizes sizes;
  if (!on_device) return sizes;
  sizes.scratch_bytes = scratch_bound_bytes;
#ifdef GPUMEM_WITH_CUDA
  if (cublas::load().loaded) sizes.blas_bytes = blas_workspace_bytes;
#endif
  return sizes;
}

void bind_stream_workspace(bool on_device, stream_handle stream, void* scratch, std::size_t scratch_bytes, void* blas,
                           std::size_t blas_bytes) {
  const workspace_sizes needed = workspace_bytes(on_device);
  check_part(scratch, scratch_bytes, needed.scratch_bytes, "scratchPtr", "scratchBytes");
  check_part(blas, blas_bytes, needed.blas_bytes, "blasPtr", "blasBytes");
  registry& r = reg();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& table = on_device ? r.device : r.host;
  if (table.count(stream) != 0) {
    throw invalid_state("stream " + stream_name(stream) + " already has a workspace bound; unbind it first");
  }
  table.emplace(stream, workspace::binding{scratch, scratch_bytes, blas, blas_bytes});
}

void unbind_stream_workspace(bool on_device, stream_handle stream) {
  registry& r = reg();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto& table = on_device ? r.device : r.host;
    if (table.erase(stream) == 0) throw invalid_state("stream " + stream_name(stream) + " has no workspace bound");
  }
#ifdef GPUMEM_WITH_CUDA
  if (on_device) cublas::forget_stream(static_cast<cudaStream_t>(stream));
#endif
}

std::uint64_t unbound_allocations() { return reg().unbound.load(std::memory_order_relaxed); }

namespace workspace {

std::optional<binding> find(stream_handle stream) {
  registry& r = reg();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.device.find(stream);
  if (it == r.device.end()) return std::nullopt;
  return it->second;
}

void count_unbound_allocation() { reg().unbound.fetch_add(1, std::memory_order_relaxed); }

}  // namespace workspace
}  // namespace gpumem::ops
