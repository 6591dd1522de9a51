#include "gpumem/stream_ordering.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <vector>

#include "gpumem/errors.hpp"

#ifdef GPUMEM_WITH_CUDA
#include "core/cuda_calls.hpp"

#include <string>
#endif

namespace gpumem {

namespace {

// The work queued on host streams (defer_host_work). Each queue counts the work it was given and
// the work it has run; an event is a stream and a count to reach.
struct host_queue {
  std::deque<std::function<void()>> work;
  std::uint64_t queued = 0;
  std::uint64_t done = 0;
};

struct host_queues {
  std::mutex mutex;
  std::map<stream_handle, host_queue> by_stream;
  std::atomic<std::uint64_t> pending{0};  // work queued and not run, on all streams: the fast path
};

host_queues& queues() {
  static auto* q = new host_queues();  // never destroyed: usable during static destruction
  return *q;
}

// Runs the work of `stream` up to its `target`-th item (under the lock: the work is a short copy
// and must not call back here).
void run_host_work(host_queues& q, stream_handle stream, std::uint64_t target) noexcept {
  auto it = q.by_stream.find(stream);
  if (it == q.by_stream.end()) return;
  host_queue& h = it->second;
  while (h.done < target && !h.work.empty()) {
    std::function<void()> work = std::move(h.work.front());
    h.work.pop_front();
    ++h.done;
    q.pending.fetch_sub(1, std::memory_order_relaxed);
    work();
  }
  if (h.work.empty()) q.by_stream.erase(it);
}

struct host_event {
  stream_handle stream;
  std::uint64_t target;
};

// Host memory is used synchronously by the calling thread: there is nothing to wait for, except
// work queued on a host stream (defer_host_work), which waiting runs.
class host_ordering final : public stream_ordering {
 public:
  event_handle record(stream_handle stream) override {
    host_queues& q = queues();
    if (q.pending.load(std::memory_order_relaxed) == 0) return nullptr;
    std::lock_guard<std::mutex> lock(q.mutex);
    auto it = q.by_stream.find(stream);
    if (it == q.by_stream.end() || it->second.work.empty()) return nullptr;
    return new host_event{stream, it->second.queued};
  }
  bool query(event_handle event) override {
    if (event == nullptr) return true;
    auto* e = static_cast<host_event*>(event);
    host_queues& q = queues();
    std::lock_guard<std::mutex> lock(q.mutex);
    auto it = q.by_stream.find(e->stream);
    return it == q.by_stream.end() || it->second.done >= e->target;
  }
  // Work on the waiting stream runs on the calling thread, after this returns: the event's work
  // must run now.
  void wait(stream_handle, event_handle event) override { synchronize(event); }
  void synchronize(event_handle event) override {
    if (event == nullptr) return;
    auto* e = static_cast<host_event*>(event);
    host_queues& q = queues();
    std::lock_guard<std::mutex> lock(q.mutex);
    run_host_work(q, e->stream, e->target);
  }
  void release(event_handle event) noexcept override { delete static_cast<host_event*>(event); }
};

#ifdef GPUMEM_WITH_CUDA

[[noreturn]] void throw_cuda(CUresult status, const char* call) {
  const char* name = detail::cu::GetErrorName(status);
  const char* text = detail::cu::GetErrorString(status);
  throw cuda_error(std::string(call) + " failed: " + name + " (" + text + ")", static_cast<int>(status), name);
}

void check(CUresult status, const char* call) {
  if (status != CUDA_SUCCESS) throw_cuda(status, call);
}

// Makes `device` current for a scope and gives the caller's device back after: events must be
// created and recorded on their stream's device, and the nullptr stream means the current device's.
class device_scope {
 public:
  explicit device_scope(int device) {
    check(detail::cu::GetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) {
      check(detail::cu::SetDevice(device), "cudaSetDevice");
      switched_ = true;
    }
  }
  ~device_scope() {
    if (switched_) (void)detail::cu::SetDevice(previous_);
  }
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

// CUDA events from a cache: the pool records one per cross-stream reuse or record_stream free, and
// creating an event each time would cost more than the allocation it orders.
class cuda_ordering final : public stream_ordering {
 public:
  explicit cuda_ordering(int device) : device_(device) {
    device_scope scope(device_);  // rejects a device that does not exist, now rather than later
  }

  ~cuda_ordering() override {
    for (cudaEvent_t event : cache_) (void)detail::cu::EventDestroy(event);
  }

  event_handle record(stream_handle stream) override {
    device_scope scope(device_);
    cudaEvent_t event = take_event();
    const CUresult status = detail::cu::EventRecord(event, static_cast<cudaStream_t>(stream));
    if (status != CUDA_SUCCESS) {
      give_event(event);
      throw_cuda(status, "cudaEventRecord");
    }
    return event;
  }

  bool query(event_handle event) override {
    if (event == nullptr) return true;
    const CUresult status = detail::cu::EventQuery(static_cast<cudaEvent_t>(event));
    if (status == CUDA_SUCCESS) return true;
    if (status == CUDA_ERROR_NOT_READY) {
      return false;
    }
    throw_cuda(status, "cudaEventQuery");
  }

  void wait(stream_handle stream, event_handle event) override {
    if (event == nullptr) return;
    device_scope scope(device_);
    check(detail::cu::StreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0),
          "cudaStreamWaitEvent");
  }

  void synchronize(event_handle event) override {
    if (event == nullptr) return;
    check(detail::cu::EventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize");
  }

  void release(event_handle event) noexcept override {
    if (event != nullptr) give_event(static_cast<cudaEvent_t>(event));
  }

 private:
  cudaEvent_t take_event() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!cache_.empty()) {
        cudaEvent_t event = cache_.back();
        cache_.pop_back();
        return event;
      }
    }
    cudaEvent_t event = nullptr;
    check(detail::cu::EventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return event;
  }

  void give_event(cudaEvent_t event) noexcept {
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      cache_.push_back(event);
    } catch (...) {
      (void)detail::cu::EventDestroy(event);  // no room to cache it
    }
  }

  int device_;
  std::mutex mutex_;
  std::vector<cudaEvent_t> cache_;
};

#endif  // GPUMEM_WITH_CUDA

}  // namespace

namespace {

// The live observers. Allocated once and never destroyed, so that a resource destroyed during
// static destruction can still unregister.
struct observer_registry {
  std::mutex mutex;
  std::vector<stream_observer*> observers;
};

observer_registry& observers() {
  static auto* registry = new observer_registry();
  return *registry;
}

}  // namespace

void add_stream_observer(stream_observer& observer) {
  observer_registry& r = observers();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.observers.push_back(&observer);
}

void remove_stream_observer(stream_observer& observer) noexcept {
  observer_registry& r = observers();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = std::find(r.observers.begin(), r.observers.end(), &observer);
  if (it != r.observers.end()) r.observers.erase(it);
}

void notify_stream_destroyed(stream_handle stream) noexcept {
  if (stream == nullptr) return;
  observer_registry& r = observers();
  // Held throughout, so that an observer cannot be destroyed while it is being told.
  std::lock_guard<std::mutex> lock(r.mutex);
  for (stream_observer* observer : r.observers) observer->on_stream_destroyed(stream);
}

void defer_host_work(stream_handle stream, std::function<void()> work) {
  host_queues& q = queues();
  std::lock_guard<std::mutex> lock(q.mutex);
  host_queue& h = q.by_stream[stream];
  h.work.push_back(std::move(work));
  ++h.queued;
  q.pending.fetch_add(1, std::memory_order_relaxed);
}

void synchronize_host_stream(stream_handle stream) noexcept {
  host_queues& q = queues();
  if (q.pending.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> lock(q.mutex);
  run_host_work(q, stream, std::numeric_limits<std::uint64_t>::max());
}

void synchronize_host_streams() noexcept {
  host_queues& q = queues();
  if (q.pending.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> lock(q.mutex);
  while (!q.by_stream.empty()) run_host_work(q, q.by_stream.begin()->first, std::numeric_limits<std::uint64_t>::max());
}

std::unique_ptr<stream_ordering> make_host_ordering() { return std::make_unique<host_ordering>(); }

std::unique_ptr<stream_ordering> make_cuda_ordering(int device) {
#ifdef GPUMEM_WITH_CUDA
  return std::make_unique<cuda_ordering>(device);
#else
  (void)device;
  throw invalid_state("built without CUDA");
#endif
}

std::unique_ptr<stream_ordering> make_ordering(memory_kind kind, int device) {
  // Managed and mapped pinned memory are touched by kernels in stream order too, so they need events
  // like device memory (`device` is then the CUDA device whose streams use them).
  if (kind == memory_kind::host) return make_host_ordering();
  return make_cuda_ordering(device);
}

}  // namespace gpumem
