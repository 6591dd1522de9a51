// Allocation traces inside PyTorch: the process's one trace recorder, GPUMEM_TRACE, the
// gpumem_trace_* exports (gpumem_torch_trace.h), and the flush at exit.
#include "trace_capture.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "c_status.hpp"
#include "gpumem_torch_trace.h"
#include "warnings.hpp"

namespace gpumem::torch {

namespace {

// Never destroyed, like the strategies: PyTorch frees tensors while the process exits.
trace_recorder& recorder() {
  static trace_recorder* r = new trace_recorder();
  return *r;
}

std::once_flag env_once;
// Why GPUMEM_TRACE could not start (written under env_once), said once after it: not inside
// call_once, where a handler waiting for Python's lock would stall every thread that allocates.
std::string env_warning;
std::atomic<bool> env_warning_said{false};
// The Python package's frame hook (gpumem_trace_set_frame_hook), asked only while a recording
// takes frames.
std::atomic<gpumem_trace_frame_hook> frame_hook{nullptr};
std::once_flag atfork_once;

void in_forked_child() { recorder().abandon_after_fork(); }

// Before the first recording: a child made by fork() (e.g. a DataLoader worker) must not write to
// the parent's file, nor wait for the parent's writer thread.
void watch_forks() {
  std::call_once(atfork_once, [] { pthread_atfork(nullptr, nullptr, in_forked_child); });
}

// "pool" from "strategy=pool pool.upstream=cuda ...".
std::string strategy_of(const std::string& config) {
  const std::string key = "strategy=";
  if (config.compare(0, key.size(), key) != 0) return "";
  const std::size_t end = config.find(' ');
  return config.substr(key.size(), end == std::string::npos ? std::string::npos : end - key.size());
}

trace_options options_for(const std::string& path, const std::string& trigger, const char* workload) {
  trace_options o;
  o.path = path;
  o.format = trace_format_for_path(path);
  const std::string config = gpumem_config();
  o.allocator = strategy_of(config);
  if (workload != nullptr && *workload != '\0') {
    o.workload_json = workload;
  } else {
    o.workload_json = "{\"config\":" + json_quote(config) + ",\"pid\":" + std::to_string(static_cast<long>(getpid())) +
                      ",\"trigger\":" + json_quote(trigger) + "}";
  }
  return o;
}

void start_from_env() noexcept {
  try {
    const char* path = std::getenv("GPUMEM_TRACE");
    if (path == nullptr || *path == '\0') return;
    watch_forks();
    std::string error;
    if (!recorder().start(options_for(path, "GPUMEM_TRACE", nullptr), error)) {
      // A bad path must not stop the program: say so and run without a trace.
      env_warning = error + " (GPUMEM_TRACE); running without an allocation trace";
    }
  } catch (...) {
    env_warning = "gpumem: GPUMEM_TRACE: could not start the trace; running without one";
  }
}

void ensure_env_trace() noexcept {
  try {
    std::call_once(env_once, start_from_env);
  } catch (...) {
  }
  if (!env_warning.empty() && !env_warning_said.exchange(true)) warn(GPUMEM_TORCH_WARN_RUNTIME, env_warning);
}

// Completes a trace still being recorded when the process exits normally (after the interpreter's
// own shutdown, whose frees are recorded). A static object's destructor runs at exit() whether
// the library was linked or loaded with dlopen.
struct flush_at_exit {
  ~flush_at_exit() {
    trace_recorder& r = recorder();
    std::uint64_t events = 0;
    std::string error;
    if (r.active() && !r.stop(events, error) && !r.write_failed()) std::fprintf(stderr, "%s\n", error.c_str());
  }
} flusher;

}  // namespace

void trace_event(trace_action action, const void* ptr, long long bytes, int device, const void* stream,
                 bool frame) noexcept {
  ensure_env_trace();
  trace_recorder& r = recorder();
  if (!r.active()) return;
  std::uint32_t tag = 0;
  std::uint64_t generation = 0;
  if (frame && r.frames_active()) {
    // Before any lock of the recorder's: the hook takes the GIL.
    if (gpumem_trace_frame_hook hook = frame_hook.load(std::memory_order_acquire)) {
      generation = r.generation();
      tag = hook(generation);
    }
  }
  r.record(action, reinterpret_cast<std::uintptr_t>(ptr), bytes < 0 ? 0 : static_cast<std::uint64_t>(bytes),
           reinterpret_cast<std::uintptr_t>(stream), device, tag, generation);
}

}  // namespace gpumem::torch

using gpumem::torch::recorder;
using gpumem::torch::set_last_error;

extern "C" {

GPUMEM_TORCH_API int gpumem_trace_start(const char* path, const char* workload_json) {
  return gpumem_trace_start_frames(path, workload_json, 0);
}

GPUMEM_TORCH_API int gpumem_trace_start_frames(const char* path, const char* workload_json, uint32_t named_frames) {
  gpumem::torch::ensure_env_trace();  // GPUMEM_TRACE first, so that the two do not race for the recorder
  if (path == nullptr || *path == '\0') {
    set_last_error("gpumem: gpumem_trace_start: the file name is empty");
    return GPUMEM_TORCH_ERR_ARGUMENT;
  }
  if (named_frames > gpumem::torch::frame_tags::max_named) {
    set_last_error("gpumem: gpumem_trace_start_frames: named_frames " + std::to_string(named_frames) +
                   " is more than " + std::to_string(gpumem::torch::frame_tags::max_named));
    return GPUMEM_TORCH_ERR_ARGUMENT;
  }
  if (named_frames > 0 && gpumem::torch::trace_format_for_path(path) != gpumem::torch::trace_format::jsonl) {
    set_last_error("gpumem: frames are recorded in gpumem's JSONL trace only; RMM's CSV has no tags (path '" +
                   std::string(path) + "')");
    return GPUMEM_TORCH_ERR_ARGUMENT;
  }
  if (workload_json != nullptr && *workload_json != '\0') {
    const std::string w = workload_json;
    if (w.front() != '{' || w.back() != '}') {
      set_last_error("gpumem: gpumem_trace_start: the workload must be a JSON object");
      return GPUMEM_TORCH_ERR_ARGUMENT;
    }
  }
  return gpumem::torch::guard_export("gpumem_trace_start", GPUMEM_TORCH_ERR_TRACE, [&] {
    gpumem::torch::watch_forks();
    std::string error;
    gpumem::torch::trace_options options = gpumem::torch::options_for(path, "gpumem_trace_start", workload_json);
    options.named_frames = named_frames;
    if (!recorder().start(options, error)) {
      set_last_error(error);
      return GPUMEM_TORCH_ERR_TRACE;
    }
    set_last_error("");
    return GPUMEM_TORCH_OK;
  });
}

GPUMEM_TORCH_API int gpumem_trace_stop(uint64_t* events) {
  gpumem::torch::ensure_env_trace();
  return gpumem::torch::guard_export("gpumem_trace_stop", GPUMEM_TORCH_ERR_TRACE, [&] {
    std::uint64_t n = 0;
    std::string error;
    const bool ok = recorder().stop(n, error);
    if (events != nullptr) *events = n;
    set_last_error(ok ? std::string() : error);
    return ok ? GPUMEM_TORCH_OK : GPUMEM_TORCH_ERR_TRACE;
  });
}

GPUMEM_TORCH_API int gpumem_trace_active(void) {
  gpumem::torch::ensure_env_trace();
  return recorder().active() ? 1 : 0;
}

GPUMEM_TORCH_API const char* gpumem_trace_path(void) {
  thread_local std::string path;
  try {
    path = recorder().path();
  } catch (...) {
    path.clear();
  }
  return path.c_str();
}

GPUMEM_TORCH_API void gpumem_trace_set_frame_hook(gpumem_trace_frame_hook hook) {
  gpumem::torch::frame_hook.store(hook, std::memory_order_release);
}

GPUMEM_TORCH_API int gpumem_trace_frames_active(void) { return recorder().frames_active() ? 1 : 0; }

GPUMEM_TORCH_API uint32_t gpumem_trace_frame_tag(uint64_t recording, const char* name) {
  try {
    return recorder().intern_frame(recording, name);
  } catch (...) {
    return 0;  // no memory for the name: "other"
  }
}

GPUMEM_TORCH_API int gpumem_trace_simulate(uint64_t count, uint64_t bytes) {
  if (bytes == 0 || bytes > (uint64_t{1} << 40)) {
    set_last_error("gpumem: gpumem_trace_simulate: bytes must be between 1 and 2^40");
    return GPUMEM_TORCH_ERR_ARGUMENT;
  }
  constexpr std::uintptr_t base = 0x7e0000000000;
  for (uint64_t i = 0; i < count; ++i) {
    const auto* p = reinterpret_cast<const void*>(base + (i % 4096) * 4096);
    const auto size = static_cast<long long>(bytes);
    gpumem::torch::trace_event(gpumem::torch::trace_action::alloc, p, size, 0, nullptr, true);
    gpumem::torch::trace_event(gpumem::torch::trace_action::free, p, size, 0, nullptr);
  }
  set_last_error("");
  return GPUMEM_TORCH_OK;
}

GPUMEM_TORCH_API uint64_t gpumem_trace_events(void) {
  try {
    return recorder().event_count();
  } catch (...) {
    return 0;
  }
}

}  // extern "C"
