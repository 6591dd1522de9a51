// slab: an example gpumem strategy written in C++ and shipped as a shared library through the
// plug-in ABI (gpumem/plugin.h, the only gpumem file it needs). Fixed size classes carved out of
// slabs, for workloads that make many allocations of a few sizes (per-node buffers, small tensors
// of one shape).
//
//  - a request is served from the smallest size class that holds it (256 B, 512 B, ... up to
//    `max_class`, default 64 KiB); each class takes slabs of `slab_bytes` (default 1 MiB) from the
//    upstream and hands out their blocks, 256-byte aligned;
//  - larger requests go straight to the upstream;
//  - the upstream is cudaMalloc/cudaFree on a CUDA device, or 256-byte aligned host memory for
//    device -1 (so the example runs on machines without a GPU);
//  - stream order: a slab belongs to the stream it was taken on, so a freed block is reused at once
//    by later requests on that stream only (their work runs after the work that used it); large
//    allocations are freed with cudaFree, which waits for the device;
//  - empty slabs are kept; trim gives them back; `max_reserved` (default 0: none) caps what is taken
//    from the upstream, as a small device would;
//  - thread-safe: one mutex per state.
//
// Options ("key=value;key=value"): slab_bytes, max_class, max_reserved; sizes as plain integers or
// with a KiB/MiB/GiB suffix.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#ifdef GPUMEM_SLAB_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "gpumem/plugin.h"

namespace {

constexpr std::size_t alignment = GPUMEM_PLUGIN_ALIGNMENT;

struct options {
  std::size_t slab_bytes = std::size_t{1} << 20;
  std::size_t max_class = std::size_t{64} << 10;
  std::size_t max_reserved = 0;  // 0: no cap
};

struct slab {
  char* base;
  void* stream;
  std::size_t block_bytes;
  std::vector<std::uint32_t> free_blocks;  // a stack of free block indices
  std::size_t live = 0;
};

struct state {
  options opts;
  int device = -1;
  std::vector<std::size_t> class_sizes;              // 256, 512, ... max_class
  std::mutex mutex;
  std::vector<std::vector<std::unique_ptr<slab>>> classes;  // per size class
  std::unordered_map<void*, slab*> blocks;           // live block -> its slab; nullptr: a large allocation
  gpumem_plugin_stats stats{0, 0, 0, -1};
  // Each thread's last failed allocate (plugin.h: last_error). Kept in the state rather than in a
  // thread_local, so that nothing of the library outlives dlclose in the threads that called it.
  std::unordered_map<std::thread::id, std::string> errors;
};

// Records the message of a failed allocate (mutex held) and returns its status.
int fail(state& s, int status, std::string message) {
  s.errors[std::this_thread::get_id()] = std::move(message);
  return status;
}

std::size_t round_up(std::size_t bytes) { return (bytes + alignment - 1) / alignment * alignment; }

// ----- the upstream: device or host memory --------------------------------------------------------

// Takes `bytes` from the upstream into *out; returns a GPUMEM_PLUGIN_* status (message set on failure).
int upstream_allocate(state& s, std::size_t bytes, void** out) {
  if (s.opts.max_reserved != 0 && s.stats.reserved_bytes + bytes > s.opts.max_reserved) {
    return fail(s, GPUMEM_PLUGIN_OUT_OF_MEMORY, "max_reserved (" + std::to_string(s.opts.max_reserved) +
                                                 " bytes) reached: " + std::to_string(s.stats.reserved_bytes) +
                                                 " reserved, " + std::to_string(bytes) + " more needed");
  }
  void* ptr = nullptr;
  if (s.device < 0) {
    if (bytes > SIZE_MAX - alignment) return fail(s, GPUMEM_PLUGIN_OUT_OF_MEMORY, "out of host memory");
    ptr = std::aligned_alloc(alignment, round_up(bytes));
    if (ptr == nullptr) return fail(s, GPUMEM_PLUGIN_OUT_OF_MEMORY, "out of host memory");
  } else {
#ifdef GPUMEM_SLAB_WITH_CUDA
    const cudaError_t status = cudaMalloc(&ptr, bytes);
    if (status != cudaSuccess) {
      cudaGetLastError();  // clear it, so later calls work
      const int code = status == cudaErrorMemoryAllocation ? GPUMEM_PLUGIN_OUT_OF_MEMORY : GPUMEM_PLUGIN_ERROR;
      return fail(s, code, std::string("cudaMalloc: ") + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
    }
#else
    return fail(s, GPUMEM_PLUGIN_ERROR, "built without CUDA");
#endif
  }
  s.stats.reserved_bytes += bytes;
  ++s.stats.upstream_alloc_count;
  *out = ptr;
  return GPUMEM_PLUGIN_OK;
}

void upstream_free(state& s, void* ptr, std::size_t bytes) {
  if (s.device < 0) {
    std::free(ptr);
  } else {
#ifdef GPUMEM_SLAB_WITH_CUDA
    if (cudaFree(ptr) != cudaSuccess) cudaGetLastError();  // the memory is gone either way
#endif
  }
  s.stats.reserved_bytes -= bytes;
  ++s.stats.upstream_free_count;
}

// ----- options ------------------------------------------------------------------------------------

// A size: digits, optionally followed by KiB, MiB or GiB.
bool parse_size(const std::string& text, std::size_t& out) {
  errno = 0;
  char* end = nullptr;
  if (text.empty() || text[0] < '0' || text[0] > '9') return false;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0) return false;
  const std::string unit(end);
  unsigned shift = 0;
  if (unit == "KiB") shift = 10;
  else if (unit == "MiB") shift = 20;
  else if (unit == "GiB") shift = 30;
  else if (!unit.empty()) return false;
  if (value > (SIZE_MAX >> shift)) return false;
  out = static_cast<std::size_t>(value) << shift;
  return true;
}

bool parse_options(const char* text, options& out, std::string& error) {
  const std::string all = text == nullptr ? "" : text;
  std::size_t start = 0;
  while (start < all.size()) {
    std::size_t end = all.find(';', start);
    if (end == std::string::npos) end = all.size();
    const std::string pair = all.substr(start, end - start);
    start = end + 1;
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0) {
      error = "expected key=value but received '" + pair + "'";
      return false;
    }
    const std::string key = pair.substr(0, eq);
    const std::string value = pair.substr(eq + 1);
    std::size_t* target = key == "slab_bytes"     ? &out.slab_bytes
                          : key == "max_class"    ? &out.max_class
                          : key == "max_reserved" ? &out.max_reserved
                                                  : nullptr;
    if (target == nullptr) {
      error = "unknown option '" + key + "'; expected one of: slab_bytes, max_class, max_reserved";
      return false;
    }
    if (!parse_size(value, *target)) {
      error = "expected a size (bytes, or with KiB/MiB/GiB) for " + key + " but received '" + value + "'";
      return false;
    }
  }
  if (out.slab_bytes == 0 || out.slab_bytes % alignment != 0) {
    error = "expected a positive multiple of 256 for slab_bytes but received " + std::to_string(out.slab_bytes);
    return false;
  }
  if (out.max_class < alignment || (out.max_class & (out.max_class - 1)) != 0 || out.max_class > out.slab_bytes) {
    error = "expected a power of two from 256 to slab_bytes for max_class but received " + std::to_string(out.max_class);
    return false;
  }
  return true;
}

void copy_error(const std::string& message, char* error, std::size_t error_len) {
  if (error == nullptr || error_len == 0) return;
  std::snprintf(error, error_len, "%s", message.c_str());
}

// ----- the plug-in functions ------------------------------------------------------------------------

void* slab_create(const char* options_text, int device, char* error, std::size_t error_len) {
  try {
    auto s = std::make_unique<state>();
    std::string message;
    if (!parse_options(options_text, s->opts, message)) {
      copy_error(message, error, error_len);
      return nullptr;
    }
    if (device >= 0) {
#ifdef GPUMEM_SLAB_WITH_CUDA
      int count = 0;
      if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        count = 0;
      }
      if (device >= count) {
        copy_error("CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(count) + " visible)",
                   error, error_len);
        return nullptr;
      }
#else
      copy_error("device " + std::to_string(device) + " needs CUDA, and this library was built without it (use -1)",
                 error, error_len);
      return nullptr;
#endif
    }
    s->device = device;
    for (std::size_t size = alignment; size <= s->opts.max_class; size *= 2) s->class_sizes.push_back(size);
    s->classes.resize(s->class_sizes.size());
    return s.release();
  } catch (const std::bad_alloc&) {
    copy_error("out of host memory", error, error_len);
    return nullptr;
  }
}

int slab_allocate(void* handle, std::size_t bytes, void* stream, void** out) {
  auto& s = *static_cast<state*>(handle);
  try {
    std::lock_guard<std::mutex> lock(s.mutex);
    const auto it = std::lower_bound(s.class_sizes.begin(), s.class_sizes.end(), bytes);
    if (it == s.class_sizes.end()) {  // large: straight to the upstream
      void* ptr = nullptr;
      const int status = upstream_allocate(s, bytes, &ptr);
      if (status != GPUMEM_PLUGIN_OK) return status;
      try {
        s.blocks.emplace(ptr, nullptr);
      } catch (...) {
        upstream_free(s, ptr, bytes);  // undo, so that a failure changes nothing
        throw;
      }
      *out = ptr;
      return GPUMEM_PLUGIN_OK;
    }
    auto& cls = s.classes[static_cast<std::size_t>(it - s.class_sizes.begin())];
    slab* owner = nullptr;
    for (auto& candidate : cls) {
      if (candidate->stream == stream && !candidate->free_blocks.empty()) {
        owner = candidate.get();
        break;
      }
    }
    if (owner == nullptr) {  // a new slab for this class and stream
      const std::size_t count = s.opts.slab_bytes / *it;
      auto fresh = std::make_unique<slab>(slab{nullptr, stream, *it, {}, 0});
      fresh->free_blocks.reserve(count);
      for (std::size_t i = count; i > 0; --i) fresh->free_blocks.push_back(static_cast<std::uint32_t>(i - 1));
      void* base = nullptr;
      const int status = upstream_allocate(s, s.opts.slab_bytes, &base);
      if (status != GPUMEM_PLUGIN_OK) return status;
      fresh->base = static_cast<char*>(base);
      try {
        cls.push_back(std::move(fresh));
      } catch (...) {
        upstream_free(s, base, s.opts.slab_bytes);
        throw;
      }
      owner = cls.back().get();
    }
    const std::uint32_t index = owner->free_blocks.back();
    void* ptr = owner->base + std::size_t{index} * owner->block_bytes;
    s.blocks.emplace(ptr, owner);  // may throw bad_alloc: nothing changed yet
    owner->free_blocks.pop_back();
    ++owner->live;
    *out = ptr;
    return GPUMEM_PLUGIN_OK;
  } catch (const std::bad_alloc&) {  // the bookkeeping (or the message) could not grow: nothing changed
    try {
      std::lock_guard<std::mutex> lock(s.mutex);
      return fail(s, GPUMEM_PLUGIN_OUT_OF_MEMORY, "out of host memory for the slab's bookkeeping");
    } catch (...) {
      return GPUMEM_PLUGIN_OUT_OF_MEMORY;
    }
  }
}

// gpumem checks pointer and size before calling (plugin.h), so both are known to be right here.
void slab_deallocate(void* handle, void* ptr, std::size_t bytes, void*) {
  auto& s = *static_cast<state*>(handle);
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto it = s.blocks.find(ptr);
  if (it == s.blocks.end()) return;
  slab* owner = it->second;
  s.blocks.erase(it);
  if (owner == nullptr) {
    upstream_free(s, ptr, bytes);
    return;
  }
  const auto offset = static_cast<std::size_t>(static_cast<char*>(ptr) - owner->base);
  owner->free_blocks.push_back(static_cast<std::uint32_t>(offset / owner->block_bytes));  // capacity reserved
  --owner->live;
}

void slab_destroy(void* handle) {
  auto* s = static_cast<state*>(handle);
  for (auto& cls : s->classes) {
    for (auto& sl : cls) upstream_free(*s, sl->base, s->opts.slab_bytes);
  }
  // Large allocations still live (the state goes away, so the counters no longer matter).
  for (auto& [ptr, owner] : s->blocks) {
    if (owner != nullptr) continue;
    if (s->device < 0) std::free(ptr);
#ifdef GPUMEM_SLAB_WITH_CUDA
    else if (cudaFree(ptr) != cudaSuccess) cudaGetLastError();
#endif
  }
  delete s;
}

// Valid until this thread's next call on the state: only this thread writes its entry, and the
// map's nodes do not move.
const char* slab_last_error(void* handle) {
  auto& s = *static_cast<state*>(handle);
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto it = s.errors.find(std::this_thread::get_id());
  return it == s.errors.end() ? "" : it->second.c_str();
}

void slab_stats(void* handle, gpumem_plugin_stats* out) {
  auto& s = *static_cast<state*>(handle);
  std::lock_guard<std::mutex> lock(s.mutex);
  *out = s.stats;
  out->largest_free_block = 0;  // the largest block size with a free block
  for (std::size_t i = 0; i < s.classes.size(); ++i) {
    for (const auto& sl : s.classes[i]) {
      if (!sl->free_blocks.empty()) out->largest_free_block = static_cast<std::int64_t>(s.class_sizes[i]);
    }
  }
}

// Gives empty slabs back until at most `bytes_to_keep` stay reserved.
void slab_trim(void* handle, std::size_t bytes_to_keep) {
  auto& s = *static_cast<state*>(handle);
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto& cls : s.classes) {
    for (auto it = cls.begin(); it != cls.end() && s.stats.reserved_bytes > bytes_to_keep;) {
      if ((*it)->live != 0) {
        ++it;
        continue;
      }
      upstream_free(s, (*it)->base, s.opts.slab_bytes);
      it = cls.erase(it);
    }
  }
}

const char* slab_name(void*) { return "slab"; }

const gpumem_plugin_v1 table = {
    GPUMEM_PLUGIN_ABI_VERSION,
    0,  // thread-safe: no GPUMEM_PLUGIN_FLAG_SERIALIZE
    slab_create,
    slab_allocate,
    slab_deallocate,
    slab_destroy,
    slab_last_error,
    slab_stats,
    slab_trim,
    slab_name,
};

}  // namespace

extern "C" GPUMEM_PLUGIN_EXPORT const gpumem_plugin_v1* gpumem_plugin_get(void) { return &table; }
