// libgpumem_torch.so: the C interface PyTorch's CUDAPluggableAllocator calls (gpumem_torch.h).
//
// One strategy per device, built on the first allocation for that device from the configuration
// read once from the environment (config.cpp), by the core's chain builder (chain_builder.hpp):
// the same chains, in the same layer order, as the Node addon builds.
#include "gpumem_torch.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.hpp"
#include "gpumem/chain_builder.hpp"
#include "gpumem/device.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/memory_resource.hpp"
#include "trace_capture.hpp"

namespace {

using namespace gpumem;
using gpumem::torch::config;
using gpumem::torch::strategy_kind;

constexpr int max_devices = 64;

// A device's resource chain.
struct strategy {
  explicit strategy(resource_chain c) : chain(std::move(c)) {}
  resource_chain chain;
  memory_resource& top() { return chain.top(); }
};

struct device_slot {
  std::atomic<strategy*> instance{nullptr};
  std::atomic<std::uint64_t> oom{0};
  std::atomic<std::uint64_t> zero_size{0};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<std::uint64_t> bad_free{0};
  std::atomic<std::uint64_t> size_fixup{0};
};

struct state {
  std::once_flag init_once;
  int init_result = GPUMEM_TORCH_OK;
  std::string init_error;
  config cfg;
  std::string description;
  std::atomic<bool> reported_config_error{false};
  std::mutex create_mutex;
  device_slot slots[max_devices];
};

// Never destroyed: PyTorch may free tensors while the process exits, after static destructors
// of this library would have run.
state& global() {
  static state* s = new state();
  return *s;
}

thread_local std::string last_error;

void set_error(std::string message) noexcept {
  try {
    last_error = std::move(message);
  } catch (...) {
  }
}

void do_init() noexcept {
  state& g = global();
  try {
    std::string error;
    if (!gpumem::torch::parse_config([](const char* name) { return std::getenv(name); }, g.cfg, error)) {
      g.init_result = GPUMEM_TORCH_ERR_CONFIG;
      g.init_error = "gpumem: " + error;
      g.description = "error: " + g.init_error;
      return;
    }
    g.description = gpumem::torch::describe(g.cfg);
  } catch (...) {
    g.init_result = GPUMEM_TORCH_ERR_CONFIG;
    g.init_error = "gpumem: could not read the configuration";
    g.description = "error: " + g.init_error;
  }
}

int ensure_init() noexcept {
  state& g = global();
  try {
    std::call_once(g.init_once, do_init);
  } catch (...) {
    return GPUMEM_TORCH_ERR_CONFIG;
  }
  return g.init_result;
}

std::unique_ptr<strategy> build(int device, const config& cfg) {
  const bool needs_free = cfg.strategy == strategy_kind::uvm && cfg.uvm_limit == gpumem::torch::uvm_limit_mode::free_memory;
  const std::uint64_t free_bytes = needs_free ? get_memory_info(device).free_bytes : 0;
  return std::make_unique<strategy>(build_chain(gpumem::torch::chain_spec_for(cfg, device, free_bytes)));
}

bool valid_index(int device) { return device >= 0 && device < max_devices; }

strategy* existing(int device) {
  if (!valid_index(device)) return nullptr;
  return global().slots[device].instance.load(std::memory_order_acquire);
}

// The device's strategy, created on first use. Throws on a bad device or a failed creation
// (the next call tries again).
strategy& get_or_create(int device) {
  state& g = global();
  if (!valid_index(device)) {
    throw invalid_argument(invalid_argument::kind::range, "device",
                           "device " + std::to_string(device) + " is out of range");
  }
  device_slot& slot = g.slots[device];
  if (strategy* s = slot.instance.load(std::memory_order_acquire)) return *s;
  std::lock_guard<std::mutex> lock(g.create_mutex);
  if (strategy* s = slot.instance.load(std::memory_order_acquire)) return *s;
  int count = device_count();
  if (device >= count) {
    throw invalid_argument(invalid_argument::kind::range, "device",
                           "device " + std::to_string(device) + " does not exist (" + std::to_string(count) +
                               " CUDA device(s) visible)");
  }
  strategy* s = build(device, g.cfg).release();  // never deleted (see global())
  slot.instance.store(s, std::memory_order_release);
  return *s;
}

std::string oom_message(const char* what, ssize_t size, int device) {
  std::string m = "gpumem: out of memory: ";
  m += gpumem::torch::strategy_name(global().cfg.strategy);
  m += " could not allocate " + format_bytes(static_cast<std::uint64_t>(size)) + " on device " +
       std::to_string(device) + " (" + what + ")";
  if (strategy* s = existing(device)) {
    try {
      resource_stats st = s->top().stats();
      m += "; gpumem holds " + format_bytes(st.allocated_bytes) + " allocated, " + format_bytes(st.reserved_bytes) +
           " reserved on this device";
    } catch (...) {
    }
  }
  return m;
}

int status_of(const std::exception_ptr& e) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const invalid_argument&) {
    return GPUMEM_TORCH_ERR_DEVICE;
  } catch (...) {
    return GPUMEM_TORCH_ERR_CUDA;
  }
}

}  // namespace

namespace gpumem::torch {
void set_last_error(std::string message) noexcept { set_error(std::move(message)); }
}  // namespace gpumem::torch

extern "C" {

GPUMEM_TORCH_API int gpumem_init(void) {
  int rc = ensure_init();
  set_error(rc == GPUMEM_TORCH_OK ? std::string() : global().init_error);
  return rc;
}

GPUMEM_TORCH_API const char* gpumem_last_error(void) { return last_error.c_str(); }

GPUMEM_TORCH_API const char* gpumem_config(void) {
  ensure_init();
  return global().description.c_str();
}

GPUMEM_TORCH_API int gpumem_abi_version(void) { return GPUMEM_TORCH_ABI_VERSION; }

GPUMEM_TORCH_API size_t gpumem_stats_size(void) { return sizeof(gpumem_torch_stats); }

// Not noexcept: under GPUMEM_OOM=raise a failure is thrown to PyTorch (see the header).
GPUMEM_TORCH_API void* gpumem_malloc(ssize_t size, int device, gpumem_stream_t stream) {
  state& g = global();
  std::string message;
  bool out_of_mem = false;
  bool raise = true;
  if (ensure_init() != GPUMEM_TORCH_OK) {
    message = g.init_error;
    if (!g.reported_config_error.exchange(true)) std::fprintf(stderr, "%s\n", message.c_str());
  } else {
    raise = g.cfg.oom == gpumem::torch::oom_mode::raise;
    try {
      if (size == 0) {
        if (valid_index(device)) g.slots[device].zero_size.fetch_add(1, std::memory_order_relaxed);
        return nullptr;
      }
      if (size < 0) {
        throw invalid_argument(invalid_argument::kind::range, "size",
                               "size " + std::to_string(static_cast<long long>(size)) + " is negative");
      }
      strategy& s = get_or_create(device);
      void* p = s.top().allocate(static_cast<std::size_t>(size), static_cast<stream_handle>(stream));
      gpumem::torch::trace_event(gpumem::torch::trace_action::alloc, p, size, device, stream);
      return p;
    } catch (const out_of_memory& e) {
      out_of_mem = true;
      gpumem::torch::trace_event(gpumem::torch::trace_action::oom, nullptr, size, device, stream);
      try {
        message = oom_message(e.what(), size, device);
      } catch (...) {
        message = "gpumem: out of memory";
      }
    } catch (const std::exception& e) {
      try {
        message = std::string("gpumem: allocation of ") + std::to_string(static_cast<long long>(size)) +
                  " bytes on device " + std::to_string(device) + " failed: " + e.what();
      } catch (...) {
        message = "gpumem: allocation failed";
      }
    } catch (...) {
      message = "gpumem: allocation failed (unknown error)";
    }
    if (valid_index(device)) {
      (out_of_mem ? g.slots[device].oom : g.slots[device].errors).fetch_add(1, std::memory_order_relaxed);
    }
  }
  set_error(message);
  if (raise) throw std::runtime_error(message);
  return nullptr;
}

GPUMEM_TORCH_API void gpumem_free(void* ptr, ssize_t size, int device, gpumem_stream_t stream) {
  if (ptr == nullptr) return;
  // Recorded before the memory can be handed out again, so that in the trace a pointer's free
  // always comes before its next allocation, whichever thread makes it.
  gpumem::torch::trace_event(gpumem::torch::trace_action::free, ptr, size, device, stream);
  state& g = global();
  try {
    auto handle = static_cast<stream_handle>(stream);
    strategy* s = existing(device);
    if (s != nullptr) {
      try {
        s->top().deallocate(ptr, static_cast<std::size_t>(size), handle);
        return;
      } catch (const invalid_argument&) {
        std::size_t actual = s->top().allocation_size(ptr);
        if (actual != 0) {
          s->top().deallocate(ptr, actual, handle);
          g.slots[device].size_fixup.fetch_add(1, std::memory_order_relaxed);
          return;
        }
      }
    }
    // Not this device's: look on the others before giving up.
    for (int d = 0; d < max_devices; ++d) {
      strategy* other = existing(d);
      if (other == nullptr || other == s) continue;
      std::size_t actual = other->top().allocation_size(ptr);
      if (actual == 0) continue;
      other->top().deallocate(ptr, actual, handle);
      if (actual != static_cast<std::size_t>(size)) g.slots[d].size_fixup.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (valid_index(device)) g.slots[device].bad_free.fetch_add(1, std::memory_order_relaxed);
    set_error("gpumem: free of " + format_pointer(ptr) + " (" + std::to_string(static_cast<long long>(size)) +
              " bytes, device " + std::to_string(device) + "): not allocated by gpumem, or already freed");
  } catch (const std::exception& e) {
    if (valid_index(device)) g.slots[device].errors.fetch_add(1, std::memory_order_relaxed);
    set_error(std::string("gpumem: free failed: ") + e.what());
  } catch (...) {
    if (valid_index(device)) g.slots[device].errors.fetch_add(1, std::memory_order_relaxed);
    set_error("gpumem: free failed (unknown error)");
  }
}

GPUMEM_TORCH_API int gpumem_record_stream(void* ptr, gpumem_stream_t stream) {
  if (ptr == nullptr) return GPUMEM_TORCH_OK;
  try {
    for (int d = 0; d < max_devices; ++d) {
      strategy* s = existing(d);
      if (s == nullptr || s->top().allocation_size(ptr) == 0) continue;
      s->top().record_stream(ptr, static_cast<stream_handle>(stream));
      return GPUMEM_TORCH_OK;
    }
    set_error("gpumem: record_stream of " + format_pointer(ptr) + ": not allocated by gpumem");
    return GPUMEM_TORCH_ERR_ARGUMENT;
  } catch (const std::exception& e) {
    set_error(std::string("gpumem: record_stream failed: ") + e.what());
    return GPUMEM_TORCH_ERR_CUDA;
  } catch (...) {
    set_error("gpumem: record_stream failed");
    return GPUMEM_TORCH_ERR_CUDA;
  }
}

GPUMEM_TORCH_API int gpumem_stats(int device, gpumem_torch_stats* out) {
  if (out == nullptr) {
    set_error("gpumem: gpumem_stats: out is NULL");
    return GPUMEM_TORCH_ERR_ARGUMENT;
  }
  if (!valid_index(device)) {
    set_error("gpumem: device " + std::to_string(device) + " is out of range");
    return GPUMEM_TORCH_ERR_DEVICE;
  }
  try {
    gpumem_torch_stats r{};
    r.largest_free_block = -1;
    r.device = device;
    state& g = global();
    device_slot& slot = g.slots[device];
    strategy* s = slot.instance.load(std::memory_order_acquire);
    if (s != nullptr) {
      resource_stats st = s->top().stats();
      r.allocated_bytes = st.allocated_bytes;
      r.peak_allocated_bytes = st.peak_allocated_bytes;
      r.reserved_bytes = st.reserved_bytes;
      r.peak_reserved_bytes = st.peak_reserved_bytes;
      r.alloc_count = st.alloc_count;
      r.free_count = st.free_count;
      r.upstream_alloc_count = st.upstream_alloc_count;
      r.upstream_free_count = st.upstream_free_count;
      r.largest_free_block = st.largest_free_block;
      r.segment_count = st.segment_count;
      r.active = 1;
    }
    r.oom_count = slot.oom.load(std::memory_order_relaxed);
    r.zero_size_count = slot.zero_size.load(std::memory_order_relaxed);
    r.error_count = slot.errors.load(std::memory_order_relaxed);
    r.bad_free_count = slot.bad_free.load(std::memory_order_relaxed);
    r.size_fixup_count = slot.size_fixup.load(std::memory_order_relaxed);
    *out = r;
    return GPUMEM_TORCH_OK;
  } catch (const std::exception& e) {
    set_error(std::string("gpumem: gpumem_stats failed: ") + e.what());
    return GPUMEM_TORCH_ERR_CUDA;
  } catch (...) {
    set_error("gpumem: gpumem_stats failed");
    return GPUMEM_TORCH_ERR_CUDA;
  }
}

GPUMEM_TORCH_API int gpumem_reset_peak(int device) {
  if (!valid_index(device)) {
    set_error("gpumem: device " + std::to_string(device) + " is out of range");
    return GPUMEM_TORCH_ERR_DEVICE;
  }
  try {
    if (strategy* s = existing(device)) s->top().reset_peak();
    return GPUMEM_TORCH_OK;
  } catch (const std::exception& e) {
    set_error(std::string("gpumem: reset_peak failed: ") + e.what());
    return status_of(std::current_exception());
  } catch (...) {
    set_error("gpumem: reset_peak failed");
    return GPUMEM_TORCH_ERR_CUDA;
  }
}

GPUMEM_TORCH_API int gpumem_trim(int device) {
  if (!valid_index(device)) {
    set_error("gpumem: device " + std::to_string(device) + " is out of range");
    return GPUMEM_TORCH_ERR_DEVICE;
  }
  try {
    if (strategy* s = existing(device)) s->top().trim(0);
    return GPUMEM_TORCH_OK;
  } catch (const std::exception& e) {
    set_error(std::string("gpumem: trim failed: ") + e.what());
    return status_of(std::current_exception());
  } catch (...) {
    set_error("gpumem: trim failed");
    return GPUMEM_TORCH_ERR_CUDA;
  }
}

}  // extern "C"
