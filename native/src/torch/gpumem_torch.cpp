// libgpumem_torch.so: the C interface PyTorch's CUDAPluggableAllocator calls (gpumem_torch.h).
//
// Instances: number 0 is configured from the environment (config.cpp), read once it is valid;
// numbers 1.. are made by gpumem_instance_create from a configuration text, each with entry points
// of its own (gpumem_malloc_<n>, ...), so that several strategies can serve one process (e.g. one
// per torch.cuda.MemPool). Each instance keeps one strategy per device, built on the first
// allocation for that device by the core's chain builder (chain_builder.hpp): the same chains, in
// the same layer order, as the Node addon builds.
#include "gpumem_torch.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "c_status.hpp"
#include "config.hpp"
#include "gpumem/chain_builder.hpp"
#include "gpumem/device.hpp"
#include "gpumem/driver_support.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/memory_resource.hpp"
#include "gpumem/placeable.hpp"
#include "oom_report.hpp"
#include "oom_ring.hpp"
#include "sleep_target.hpp"
#include "trace_capture.hpp"
#include "trace_recorder.hpp"
#include "warnings.hpp"

namespace {

using namespace gpumem;
using gpumem::torch::config;
using gpumem::torch::guard_export;
using gpumem::torch::guard_export_as;

constexpr int max_devices = 64;
// Device -1: host memory, for a strategy with the host_device flag (expandable's host twin), so that
// the library's behaviour can be checked on a machine without a GPU. PyTorch never asks for it.
constexpr int host_device = -1;
constexpr int max_instances = GPUMEM_TORCH_MAX_INSTANCES;

// A device's resource chain.
struct strategy {
  explicit strategy(resource_chain c) : chain(std::move(c)) {}
  resource_chain chain;
  // tiered: held around choosing the placement and allocating, so that each thread's choice
  // (gpumem_set_thread_placement) applies to its own allocations only.
  std::mutex placement_mutex;
  memory_resource& top() { return chain.top(); }
};

struct device_slot {
  std::atomic<strategy*> instance{nullptr};
  // The out-of-memory report's recent events (GPUMEM_OOM_WINDOW), made with the strategy; null when
  // the window is 0 or its arrays could not be had. Never deleted, as the strategy.
  std::atomic<gpumem::torch::event_ring*> ring{nullptr};
  std::atomic<std::uint64_t> oom{0};
  std::atomic<std::uint64_t> zero_size{0};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<std::uint64_t> bad_free{0};
  std::atomic<std::uint64_t> size_fixup{0};
};

// One configuration and its strategies. `cfg` and `description` are written once, before
// `configured` is set, and never change afterwards.
struct instance {
  std::atomic<bool> configured{false};
  config cfg;
  std::string description;
  std::mutex config_mutex;   // instance 0: reading the environment
  std::string config_error;  // instance 0: why the last reading failed (under config_mutex)
  std::atomic<bool> reported_config_error{false};
  std::mutex create_mutex;
  device_slot slots[max_devices + 1];  // the last one: host_device
};

struct state {
  std::mutex instances_mutex;
  std::mutex oom_report_mutex;
  std::string last_oom_report;  // JSON (gpumem_last_oom_report), under oom_report_mutex
  int instance_count = 1;  // number 0 always exists
  instance instances[max_instances];
};

// Never destroyed: PyTorch may free tensors while the process exits, after static destructors
// of this library would have run.
state& global() {
  static state* s = new state();
  return *s;
}

thread_local std::string last_error;
thread_local std::string returned_text;  // gpumem_config / gpumem_describe_config results
// gpumem_set_thread_placement: -1 is the instance's own (GPUMEM_TIERED_PLACEMENT).
thread_local int thread_placement = -1;

void set_error(std::string message) noexcept {
  try {
    last_error = std::move(message);
  } catch (...) {
  }
}

bool valid_instance(int k) { return k >= 0 && k < max_instances; }

// Instance 0 reads the environment until it is valid: a bad value is reported and nothing is
// kept, so that the process can still choose another configuration (check_config('pol') and then
// check_config('pool')). Returns GPUMEM_TORCH_OK, or GPUMEM_TORCH_ERR_CONFIG with `error` set.
// Why the running driver cannot serve `strategy` (gpumem/driver_support.hpp), or "" when it can or
// when there is no driver at all (the first allocation then says there is no device).
std::string driver_refusal(const strategy_descriptor& strategy) {
  try {
    require_driver(strategy);
    return "";
  } catch (const driver_unsupported& e) {
    return e.what();
  }
}

int configure_from_env(instance& in, std::string* error) noexcept {
  if (in.configured.load(std::memory_order_acquire)) return GPUMEM_TORCH_OK;
  try {
    std::string warning;  // said once the lock is released (the handler may take Python's lock)
    {
      std::lock_guard<std::mutex> lock(in.config_mutex);
      if (in.configured.load(std::memory_order_acquire)) return GPUMEM_TORCH_OK;
      config c;
      std::string why;
      if (!gpumem::torch::parse_config([](const char* name) { return std::getenv(name); }, c, why)) {
        in.config_error = "gpumem: " + why;
        if (error) *error = in.config_error;
        return GPUMEM_TORCH_ERR_CONFIG;
      }
      if (const std::string refused = driver_refusal(*c.strategy); !refused.empty()) {
        in.config_error = refused;
        if (error) *error = refused;
        return GPUMEM_TORCH_ERR_DRIVER;
      }
      warning = c.warning;
      in.description = gpumem::torch::describe(c);
      in.cfg = std::move(c);
      in.configured.store(true, std::memory_order_release);
    }
    gpumem::torch::warn(GPUMEM_TORCH_WARN_DEPRECATED, warning);
    return GPUMEM_TORCH_OK;
  } catch (...) {
    if (error) *error = "gpumem: could not read the configuration";
    return GPUMEM_TORCH_ERR_CONFIG;
  }
}

// The instance `k`, configured; nullptr (with `error`) when it is not.
instance* configured_instance(int k, std::string& error) noexcept {
  if (!valid_instance(k)) {
    error = "gpumem: allocator instance " + std::to_string(k) + " is out of range (0.." + std::to_string(max_instances - 1) + ")";
    return nullptr;
  }
  instance& in = global().instances[k];
  if (k == 0) return configure_from_env(in, &error) == GPUMEM_TORCH_OK ? &in : nullptr;
  if (!in.configured.load(std::memory_order_acquire)) {
    error = "gpumem: allocator instance " + std::to_string(k) + " was never created (gpumem_instance_create)";
    return nullptr;
  }
  return &in;
}

std::unique_ptr<strategy> build(int device, const config& cfg) {
  const bool needs_free =
      !cfg.strategy->front_limit.variable.empty() && cfg.front_limit == gpumem::torch::limit_mode::free_memory;
  const std::uint64_t free_bytes = needs_free ? get_memory_info(device).free_bytes : 0;
  return std::make_unique<strategy>(build_chain(gpumem::torch::chain_spec_for(cfg, device, free_bytes)));
}

bool valid_index(int device) { return device >= host_device && device < max_devices; }

device_slot& slot_of(instance& in, int device) { return in.slots[device == host_device ? max_devices : device]; }
const device_slot& slot_of(const instance& in, int device) {
  return in.slots[device == host_device ? max_devices : device];
}

strategy* existing(const instance& in, int device) {
  if (!valid_index(device)) return nullptr;
  return slot_of(in, device).instance.load(std::memory_order_acquire);
}

// The device's event ring (null with GPUMEM_OOM_WINDOW=0 or when its arrays could not be had).
gpumem::torch::event_ring* ring_of(const instance& in, int device) {
  return slot_of(in, device).ring.load(std::memory_order_acquire);
}

// The device's event ring, made before its strategy is published; left null when it cannot be had
// (the report then says so).
void make_ring(const instance& in, device_slot& slot) noexcept {
  if (in.cfg.oom_window == 0 || slot.ring.load(std::memory_order_acquire) != nullptr) return;
  try {
    slot.ring.store(new gpumem::torch::event_ring(static_cast<std::size_t>(in.cfg.oom_window)), std::memory_order_release);
  } catch (...) {
  }
}

// The device's strategy, created on first use. Throws on a bad device or a failed creation
// (the next call tries again).
strategy& get_or_create(instance& in, int device) {
  if (!valid_index(device)) {
    throw invalid_argument(invalid_argument::kind::range, "device",
                           "device " + std::to_string(device) + " is out of range");
  }
  device_slot& slot = slot_of(in, device);
  if (strategy* s = slot.instance.load(std::memory_order_acquire)) return *s;
  std::lock_guard<std::mutex> lock(in.create_mutex);
  if (strategy* s = slot.instance.load(std::memory_order_acquire)) return *s;
  if (device == host_device) {
    if (!in.cfg.strategy->flags.host_device) {
      throw invalid_argument(invalid_argument::kind::range, "device",
                             "device -1 (host memory) is for strategies with the hostDevice flag; " +
                                 in.cfg.strategy->name + " needs a CUDA device");
    }
    strategy* s = build(device, in.cfg).release();  // never deleted (see global())
    make_ring(in, slot);
    slot.instance.store(s, std::memory_order_release);
    return *s;
  }
  int count = device_count();
  if (device >= count) {
    throw invalid_argument(invalid_argument::kind::range, "device",
                           "device " + std::to_string(device) + " does not exist (" + std::to_string(count) +
                               " CUDA device(s) visible)");
  }
  strategy* s = build(device, in.cfg).release();  // never deleted (see global())
  make_ring(in, slot);
  slot.instance.store(s, std::memory_order_release);
  return *s;
}

void* allocate(strategy& s, std::size_t size, stream_handle stream) {
  placeable* placer = s.chain.placer;
  if (placer == nullptr) return s.top().allocate(size, stream);
  const placement_choice want = thread_placement < 0 ? placer->configured_placement() : static_cast<placement_choice>(thread_placement);
  std::lock_guard<std::mutex> lock(s.placement_mutex);
  if (placer->current_placement() != want) placer->set_placement(want);
  return s.top().allocate(size, stream);
}

gpumem_torch_stats stats_of(const instance& in, int device) {
  gpumem_torch_stats r{};
  r.largest_free_block = -1;
  r.host_allocated_bytes = -1;
  r.peak_host_allocated_bytes = -1;
  r.host_reserved_bytes = -1;
  r.device = device;
  const device_slot& slot = slot_of(in, device);
  if (strategy* s = slot.instance.load(std::memory_order_acquire)) {
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
    r.host_allocated_bytes = st.host_allocated_bytes;
    r.peak_host_allocated_bytes = st.peak_host_allocated_bytes;
    r.host_reserved_bytes = st.host_reserved_bytes;
    r.active = 1;
  }
  r.oom_count = slot.oom.load(std::memory_order_relaxed);
  r.zero_size_count = slot.zero_size.load(std::memory_order_relaxed);
  r.error_count = slot.errors.load(std::memory_order_relaxed);
  r.bad_free_count = slot.bad_free.load(std::memory_order_relaxed);
  r.size_fixup_count = slot.size_fixup.load(std::memory_order_relaxed);
  return r;
}

// PyTorch's convention first ("CUDA out of memory.", which the tools that shrink a batch on
// out-of-memory look for), then gpumem's detail.
std::string oom_message(const char* strategy_name, std::uint64_t size, int device, const std::string& cause,
                        const gpumem_torch_stats* st) {
  std::string m = "CUDA out of memory. gpumem: ";
  m += strategy_name;
  m += " could not allocate " + format_bytes(size) + " on device " + std::to_string(device);
  if (!cause.empty()) m += " (" + cause + ")";
  if (st == nullptr || st->active == 0) {
    m += "; nothing reserved on this device yet";
  } else {
    m += "; reserved " + format_bytes_brief(st->reserved_bytes) + ", allocated " + format_bytes_brief(st->allocated_bytes);
    if (st->host_allocated_bytes >= 0) {  // tiered: how much of it spilled
      m += " (" + format_bytes_brief(static_cast<std::uint64_t>(st->host_allocated_bytes)) + " of it on the host)";
    }
    m += std::string(", largest free block ") +
         (st->largest_free_block < 0 ? std::string("n/a") : format_bytes_brief(static_cast<std::uint64_t>(st->largest_free_block)));
  }
  return m;
}

// What this allocator could reach on `device`: its reserved bytes and the driver's free bytes, or
// the configured cap where that is less; 0 where it is not known (host memory without a limit).
std::uint64_t capacity_of(const config& cfg, int device, std::uint64_t reserved, std::string& source) {
  std::uint64_t cap = 0;
  if (device != host_device) {
    try {
      cap = reserved + get_memory_info(device).free_bytes;  // no allocation; restores the current device
      source = "reserved + the driver's free bytes";
    } catch (...) {
      cap = 0;
    }
  }
  std::uint64_t limit = cfg.spec.limit_bytes.value_or(0);
  if (!cfg.strategy->front_limit.variable.empty() && cfg.front_limit == gpumem::torch::limit_mode::bytes) {
    limit = cfg.front_limit_bytes;  // e.g. GPUMEM_UVM_LIMIT=SIZE (its limit layer is added per device)
  }
  if (cfg.strategy->own_cap_bytes != nullptr) {  // a cap of the strategy's own options caps it as a limit does
    const std::uint64_t own = cfg.strategy->own_cap_bytes(cfg.spec);
    if (own != 0 && (limit == 0 || own < limit)) limit = own;
  }
  if (limit != 0 && (cap == 0 || limit < cap)) {
    cap = limit;
    source = "the configured limit";
  }
  return cap;
}

// The report on a failed allocation (oom_report.hpp): its sentences go after the message's figures,
// its JSON is kept for gpumem_last_oom_report. Host memory only; takes the ring's lock and the
// report's, neither held by anyone who waits on another lock.
std::string oom_report_text(int k, instance& in, int device, std::uint64_t size, gpumem_stream_t stream,
                            const gpumem_torch_stats& st) {
  using namespace gpumem::torch;
  oom_context c;
  c.strategy = in.cfg.strategy->name;
  c.configured = &in.cfg.spec;
  c.instance = k;
  c.device = device;
  c.request_bytes = size;
  c.request_stream = reinterpret_cast<std::uintptr_t>(stream);
  const std::uint64_t host_live = st.host_allocated_bytes > 0 ? static_cast<std::uint64_t>(st.host_allocated_bytes) : 0;
  const std::uint64_t host_reserved = st.host_reserved_bytes > 0 ? static_cast<std::uint64_t>(st.host_reserved_bytes) : 0;
  c.live_bytes = st.allocated_bytes - std::min(host_live, st.allocated_bytes);  // on the device
  c.reserved_bytes = st.reserved_bytes - std::min(host_reserved, st.reserved_bytes);
  c.largest_free_block = st.largest_free_block;
  c.capacity_bytes = capacity_of(in.cfg, device, c.reserved_bytes, c.capacity_source);
  c.window = in.cfg.oom_window;
  c.replay_ms = in.cfg.oom_replay_ms;
  std::optional<ring_window> window;
  if (event_ring* ring = ring_of(in, device)) {
    try {
      window = ring->snapshot();
    } catch (const std::bad_alloc&) {
    }
  }
  const oom_report report = make_oom_report(c, window ? &*window : nullptr);
  std::string json = report.json();
  {
    std::lock_guard<std::mutex> lock(global().oom_report_mutex);
    global().last_oom_report.swap(json);
  }
  return report.text();
}

// The one allocation path of every entry point. `null_on_failure`: return NULL whatever GPUMEM_OOM
// says (a torch.cuda.MemPool's caching allocator checks it and raises torch.OutOfMemoryError).
void* instance_malloc(int k, ssize_t size, int device, gpumem_stream_t stream, bool null_on_failure) {
  std::optional<gpumem::torch::stderr_warnings_scope> under_torch_lock;
  if (null_on_failure) under_torch_lock.emplace();  // a MemPool's segment: PyTorch holds its lock
  std::string message;
  bool out_of_mem = false;
  bool raise = !null_on_failure;
  instance* in = configured_instance(k, message);
  if (in == nullptr) {
    if (k == 0 && !global().instances[0].reported_config_error.exchange(true)) {
      gpumem::torch::warn(GPUMEM_TORCH_WARN_RUNTIME, message);
    }
  } else {
    raise = raise && in->cfg.oom == gpumem::torch::oom_mode::raise;
    try {
      if (size == 0) {
        if (valid_index(device)) slot_of(*in, device).zero_size.fetch_add(1, std::memory_order_relaxed);
        return nullptr;
      }
      if (size < 0) {
        throw invalid_argument(invalid_argument::kind::range, "size",
                               "size " + std::to_string(static_cast<long long>(size)) + " is negative");
      }
      strategy& s = get_or_create(*in, device);
      void* p = allocate(s, static_cast<std::size_t>(size), static_cast<stream_handle>(stream));
      if (gpumem::torch::event_ring* ring = ring_of(*in, device)) {
        ring->record_alloc(p, static_cast<std::uint64_t>(size), stream);
      }
      gpumem::torch::trace_event(gpumem::torch::trace_action::alloc, p, size, device, stream, !null_on_failure);
      return p;
    } catch (const out_of_memory& e) {
      out_of_mem = true;
      gpumem::torch::trace_event(gpumem::torch::trace_action::oom, nullptr, size, device, stream);
      try {
        gpumem_torch_stats st{};
        const bool have = valid_index(device) && existing(*in, device) != nullptr;
        if (have) st = stats_of(*in, device);
        message = oom_message(in->cfg.strategy->name.c_str(), static_cast<std::uint64_t>(size), device,
                              e.what(), have ? &st : nullptr);
        if (have) {
          try {
            message += oom_report_text(k, *in, device, static_cast<std::uint64_t>(size), stream, st);
          } catch (...) {
            message += ".";  // the report could not be made: the figures above stand alone
          }
        }
      } catch (...) {
        message = "CUDA out of memory. gpumem: allocation failed";
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
      (out_of_mem ? slot_of(*in, device).oom : slot_of(*in, device).errors).fetch_add(1, std::memory_order_relaxed);
    }
  }
  set_error(message);
  if (raise) throw std::runtime_error(message);
  return nullptr;
}

void instance_free(int k, void* ptr, ssize_t size, int device, gpumem_stream_t stream) noexcept {
  if (ptr == nullptr) return;
  const gpumem::torch::stderr_warnings_scope under_torch_lock;  // PyTorch may free under its lock
  // Recorded before the memory can be handed out again, so that in the trace a pointer's free
  // always comes before its next allocation, whichever thread makes it.
  gpumem::torch::trace_event(gpumem::torch::trace_action::free, ptr, size, device, stream);
  if (!valid_instance(k)) return;
  instance& in = global().instances[k];
  try {
    auto handle = static_cast<stream_handle>(stream);
    strategy* s = existing(in, device);
    if (s != nullptr) {
      // Before the memory can be handed out again (as the trace's event above).
      if (gpumem::torch::event_ring* ring = ring_of(in, device)) {
        ring->record_free(ptr, static_cast<std::uint64_t>(size), stream);
      }
      try {
        s->top().deallocate(ptr, static_cast<std::size_t>(size), handle);
        return;
      } catch (const invalid_argument&) {
        std::size_t actual = s->top().allocation_size(ptr);
        if (actual != 0) {
          s->top().deallocate(ptr, actual, handle);
          slot_of(in, device).size_fixup.fetch_add(1, std::memory_order_relaxed);
          return;
        }
      }
    }
    // Not this device's: look on the others before giving up.
    for (int d = host_device; d < max_devices; ++d) {
      strategy* other = existing(in, d);
      if (other == nullptr || other == s) continue;
      std::size_t actual = other->top().allocation_size(ptr);
      if (actual == 0) continue;
      if (gpumem::torch::event_ring* ring = ring_of(in, d)) {
        ring->record_free(ptr, actual, stream);
      }
      other->top().deallocate(ptr, actual, handle);
      if (actual != static_cast<std::size_t>(size)) slot_of(in, d).size_fixup.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (valid_index(device)) slot_of(in, device).bad_free.fetch_add(1, std::memory_order_relaxed);
    set_error("gpumem: free of " + format_pointer(ptr) + " (" + std::to_string(static_cast<long long>(size)) +
              " bytes, device " + std::to_string(device) + "): not allocated by gpumem, or already freed");
  } catch (const std::exception& e) {
    if (valid_index(device)) slot_of(in, device).errors.fetch_add(1, std::memory_order_relaxed);
    set_error(std::string("gpumem: free failed: ") + e.what());
  } catch (...) {
    if (valid_index(device)) slot_of(in, device).errors.fetch_add(1, std::memory_order_relaxed);
    set_error("gpumem: free failed (unknown error)");
  }
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

// The configured instance `k` and a valid device, or an error code (message set).
int check_target(int k, int device, instance*& out) {
  std::string error;
  out = configured_instance(k, error);
  if (out == nullptr) {
    set_error(error);
    return k == 0 ? GPUMEM_TORCH_ERR_CONFIG : GPUMEM_TORCH_ERR_ARGUMENT;
  }
  if (!valid_index(device)) {
    set_error("gpumem: device " + std::to_string(device) + " is out of range");
    return GPUMEM_TORCH_ERR_DEVICE;
  }
  return GPUMEM_TORCH_OK;
}

// Runs op on the top of instance k's strategy for `device` where one exists (nothing to do where
// none was created), after checking k and device: gpumem_instance_reset_peak and _trim.
template <class Op>
int on_existing_top(int k, int device, const char* what, Op op) {
  if (!valid_instance(k)) {
    instance* unused = nullptr;
    return check_target(k, device, unused);
  }
  if (!valid_index(device)) {
    set_error("gpumem: device " + std::to_string(device) + " is out of range");
    return GPUMEM_TORCH_ERR_DEVICE;
  }
  return guard_export_as(what, status_of, [&] {
    if (strategy* s = existing(global().instances[k], device)) op(s->top());
    return GPUMEM_TORCH_OK;
  });
}

// Reads a configuration text (gpumem_instance_create) into `out`; false with `error` set.
bool config_from_spec(const char* spec, config& out, std::string& error) {
  if (spec == nullptr) {
    error = "gpumem: the configuration is NULL";
    return false;
  }
  std::vector<std::pair<std::string, std::string>> values;
  if (!gpumem::torch::parse_spec(spec, values, error)) {
    error = "gpumem: " + error;
    return false;
  }
  auto reader = [&values](const char* name) -> const char* {
    for (const auto& kv : values) {
      if (kv.first == name) return kv.second.c_str();
    }
    return nullptr;
  };
  if (!gpumem::torch::parse_config(reader, out, error)) {
    error = "gpumem: " + error;
    return false;
  }
  return true;
}

}  // namespace

namespace gpumem::torch {
void set_last_error(std::string message) noexcept { set_error(std::move(message)); }

int find_sleep_target(int k, int device, sleep_target& out) noexcept {
  instance* in = nullptr;
  const int rc = check_target(k, device, in);
  if (rc != GPUMEM_TORCH_OK) return rc;
  out.strategy = in->cfg.strategy;
  strategy* s = existing(*in, device);
  out.sleeper = s == nullptr ? nullptr : s->chain.sleeper;
  return GPUMEM_TORCH_OK;
}

int make_sleep_target(int k, int device, sleep_target& out) {
  instance* in = nullptr;
  const int rc = check_target(k, device, in);
  if (rc != GPUMEM_TORCH_OK) return rc;
  out.strategy = in->cfg.strategy;
  out.sleeper = out.strategy->flags.sleep ? get_or_create(*in, device).chain.sleeper : nullptr;
  return GPUMEM_TORCH_OK;
}
}  // namespace gpumem::torch

extern "C" {

GPUMEM_TORCH_API int gpumem_init(void) {
  std::string error;
  int rc = configure_from_env(global().instances[0], &error);
  set_error(rc == GPUMEM_TORCH_OK ? std::string() : error);
  return rc;
}

GPUMEM_TORCH_API const char* gpumem_last_error(void) { return last_error.c_str(); }

GPUMEM_TORCH_API const char* gpumem_config(void) { return gpumem_instance_config(0); }

GPUMEM_TORCH_API int gpumem_abi_version(void) { return GPUMEM_TORCH_ABI_VERSION; }

GPUMEM_TORCH_API const char* gpumem_strategies(void) {
  return guard_export("gpumem_strategies", nullptr, [] {
    returned_text = gpumem::strategies_json();
    set_error("");
    return returned_text.c_str();
  });
}

GPUMEM_TORCH_API const char* gpumem_driver_json(void) {
  try {
    using gpumem::torch::json_quote;
    const driver_summary d = running_driver();
    const auto need_json = [&](const driver_need& n) {
      return "{\"what\": " + json_quote(n.what) + ", \"version\": " + std::to_string(n.version) + "}";
    };
    std::string needs, refused;
    for (const strategy_descriptor* s : gpumem::strategies()) {
      std::string list;
      for (const driver_need& n : s->driver_needs) list += (list.empty() ? "" : ", ") + need_json(n);
      const driver_need* unmet = unmet_driver_need(*s);
      needs += (needs.empty() ? "" : ", ") + json_quote(s->name) + ": [" + list + "]";
      refused += (refused.empty() ? "" : ", ") + json_quote(s->name) + ": " + (unmet ? need_json(*unmet) : "null");
    }
    returned_text = std::string("{\"loaded\": ") + (d.loaded ? "true" : "false") +
                    ", \"version\": " + std::to_string(d.version) + ", \"path\": " + json_quote(d.path) +
                    ", \"failure\": " + json_quote(d.failure) + ", \"needs\": {" + needs + "}, \"refused\": {" +
                    refused + "}}";
    set_error("");
    return returned_text.c_str();
  } catch (...) {
    set_error("gpumem: gpumem_driver_json failed");
    return nullptr;
  }
}

GPUMEM_TORCH_API size_t gpumem_stats_size(void) { return sizeof(gpumem_torch_stats); }

// Not noexcept: under GPUMEM_OOM=raise a failure is thrown to PyTorch (see the header).
GPUMEM_TORCH_API void* gpumem_malloc(ssize_t size, int device, gpumem_stream_t stream) {
  return instance_malloc(0, size, device, stream, false);
}

GPUMEM_TORCH_API void gpumem_free(void* ptr, ssize_t size, int device, gpumem_stream_t stream) {
  instance_free(0, ptr, size, device, stream);
}

#define GPUMEM_TORCH_INSTANCE_ENTRY_POINTS(k)                                                          \
  GPUMEM_TORCH_API void* gpumem_malloc_##k(ssize_t size, int device, gpumem_stream_t stream) {         \
    return instance_malloc(k, size, device, stream, false);                                            \
  }                                                                                                    \
  GPUMEM_TORCH_API void* gpumem_mempool_malloc_##k(ssize_t size, int device, gpumem_stream_t stream) { \
    return instance_malloc(k, size, device, stream, true);                                             \
  }                                                                                                    \
  GPUMEM_TORCH_API void gpumem_free_##k(void* ptr, ssize_t size, int device, gpumem_stream_t stream) { \
    instance_free(k, ptr, size, device, stream);                                                       \
  }
GPUMEM_TORCH_INSTANCE_ENTRY_POINTS(0)
GPUMEM_TORCH_INSTANCE_ENTRY_POINTS(1)
GPUMEM_TORCH_INSTANCE_ENTRY_POINTS(2)
GPUMEM_TORCH_INSTANCE_ENTRY_POINTS(3)
GPUMEM_TORCH_INSTANCE_ENTRY_POINTS(4)
GPUMEM_TORCH_INSTANCE_ENTRY_POINTS(5)
GPUMEM_TORCH_INSTANCE_ENTRY_POINTS(6)
GPUMEM_TORCH_INSTANCE_ENTRY_POINTS(7)
#undef GPUMEM_TORCH_INSTANCE_ENTRY_POINTS
static_assert(GPUMEM_TORCH_MAX_INSTANCES == 8, "one GPUMEM_TORCH_INSTANCE_ENTRY_POINTS line per instance");

GPUMEM_TORCH_API int gpumem_instance_create(const char* spec) {
  return guard_export("gpumem_instance_create", -GPUMEM_TORCH_ERR_CONFIG, [&] {
    config c;
    std::string error;
    if (!config_from_spec(spec, c, error)) {
      set_error(error);
      return -GPUMEM_TORCH_ERR_CONFIG;
    }
    if (const std::string refused = driver_refusal(*c.strategy); !refused.empty()) {
      set_error(refused);
      return -GPUMEM_TORCH_ERR_DRIVER;
    }
    const std::string warning = c.warning;
    int k = 0;
    {
      state& g = global();
      std::lock_guard<std::mutex> lock(g.instances_mutex);
      if (g.instance_count >= max_instances) {
        set_error("gpumem: at most " + std::to_string(max_instances - 1) +
                  " allocator instances can be created in a process (they are never destroyed: PyTorch may still "
                  "free their memory); reuse one");
        return -GPUMEM_TORCH_ERR_ARGUMENT;
      }
      k = g.instance_count++;
      instance& in = g.instances[k];
      in.description = gpumem::torch::describe(c);
      in.cfg = std::move(c);
      in.configured.store(true, std::memory_order_release);
    }
    gpumem::torch::warn(GPUMEM_TORCH_WARN_DEPRECATED, warning);
    set_error("");
    return k;
  });
}

GPUMEM_TORCH_API const char* gpumem_describe_config(const char* spec) {
  return guard_export("gpumem_describe_config", nullptr, [&]() -> const char* {
    config c;
    std::string error;
    if (!config_from_spec(spec, c, error)) {
      set_error(error);
      return nullptr;
    }
    returned_text = gpumem::torch::describe(c);
    set_error("");
    return returned_text.c_str();
  });
}

GPUMEM_TORCH_API const char* gpumem_instance_config(int k) {
  try {
    std::string error;
    instance* in = configured_instance(k, error);
    if (in != nullptr) return in->description.c_str();
    returned_text = "error: " + error;
    return returned_text.c_str();
  } catch (...) {
    return "error: gpumem: out of memory describing the configuration";
  }
}

GPUMEM_TORCH_API int gpumem_set_thread_placement(int placement, int* previous) {
  if (placement < GPUMEM_TORCH_PLACE_DEFAULT || placement > GPUMEM_TORCH_PLACE_HOST) {
    set_error("gpumem: placement " + std::to_string(placement) +
              " is not one of -1 (the allocator's default), 0 (auto), 1 (device), 2 (host)");
    return GPUMEM_TORCH_ERR_ARGUMENT;
  }
  if (previous != nullptr) *previous = thread_placement;
  thread_placement = placement;
  return GPUMEM_TORCH_OK;
}

GPUMEM_TORCH_API int gpumem_thread_placement(void) { return thread_placement; }

GPUMEM_TORCH_API size_t gpumem_format_oom(const char* strategy_name, uint64_t request_bytes, int device, const char* cause,
                                          const gpumem_torch_stats* stats, char* out, size_t out_size) {
  try {
    const std::string m = oom_message(strategy_name ? strategy_name : "?", request_bytes, device, cause ? cause : "", stats);
    if (out != nullptr && out_size > 0) {
      const size_t n = m.size() < out_size - 1 ? m.size() : out_size - 1;
      std::memcpy(out, m.data(), n);
      out[n] = '\0';
    }
    return m.size();
  } catch (...) {
    if (out != nullptr && out_size > 0) out[0] = '\0';
    return 0;
  }
}

GPUMEM_TORCH_API const char* gpumem_last_oom_report(void) {
  return guard_export("gpumem_last_oom_report", nullptr, []() -> const char* {
    {
      std::lock_guard<std::mutex> lock(global().oom_report_mutex);
      returned_text = global().last_oom_report;
    }
    set_error("");
    return returned_text.empty() ? nullptr : returned_text.c_str();
  });
}

GPUMEM_TORCH_API int gpumem_record_stream(void* ptr, gpumem_stream_t stream) {
  if (ptr == nullptr) return GPUMEM_TORCH_OK;
  return guard_export("record_stream", GPUMEM_TORCH_ERR_CUDA, [&] {
    for (instance& in : global().instances) {
      if (!in.configured.load(std::memory_order_acquire)) continue;
      for (int d = host_device; d < max_devices; ++d) {
        strategy* s = existing(in, d);
        if (s == nullptr || s->top().allocation_size(ptr) == 0) continue;
        s->top().record_stream(ptr, static_cast<stream_handle>(stream));
        return GPUMEM_TORCH_OK;
      }
    }
    set_error("gpumem: record_stream of " + format_pointer(ptr) + ": not allocated by gpumem");
    return GPUMEM_TORCH_ERR_ARGUMENT;
  });
}

GPUMEM_TORCH_API int gpumem_instance_stats(int k, int device, gpumem_torch_stats* out) {
  if (out == nullptr) {
    set_error("gpumem: gpumem_stats: out is NULL");
    return GPUMEM_TORCH_ERR_ARGUMENT;
  }
  if (!valid_instance(k) || (k != 0 && !global().instances[k].configured.load(std::memory_order_acquire))) {
    instance* unused = nullptr;
    return check_target(k, device, unused);
  }
  if (!valid_index(device)) {
    set_error("gpumem: device " + std::to_string(device) + " is out of range");
    return GPUMEM_TORCH_ERR_DEVICE;
  }
  return guard_export("gpumem_stats", GPUMEM_TORCH_ERR_CUDA, [&] {
    *out = stats_of(global().instances[k], device);  // instance 0 reports zeros before it is configured
    return GPUMEM_TORCH_OK;
  });
}

GPUMEM_TORCH_API int gpumem_stats(int device, gpumem_torch_stats* out) { return gpumem_instance_stats(0, device, out); }

GPUMEM_TORCH_API int gpumem_instance_reset_peak(int k, int device) {
  return on_existing_top(k, device, "reset_peak", [](memory_resource& top) { top.reset_peak(); });
}

GPUMEM_TORCH_API int gpumem_reset_peak(int device) { return gpumem_instance_reset_peak(0, device); }

GPUMEM_TORCH_API int gpumem_instance_trim(int k, int device) {
  return on_existing_top(k, device, "trim", [](memory_resource& top) { top.trim(0); });
}

GPUMEM_TORCH_API int gpumem_trim(int device) { return gpumem_instance_trim(0, device); }

}  // extern "C"
