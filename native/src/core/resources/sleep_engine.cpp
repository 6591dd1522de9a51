#include "sleep_engine.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "../cuda_check.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/pinned_host_resource.hpp"  // read_host_memory_info, default_pinned_cap
#include "gpumem/stream_ordering.hpp"       // synchronize_host_streams

namespace gpumem::detail {

namespace {

constexpr std::size_t huge_page = std::size_t{2} << 20;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels refuse it (EINVAL) and pages are touched instead
#endif

std::uint64_t round_chunks(std::uint64_t bytes) {
  constexpr std::uint64_t c = sleep_engine::pin_chunk_bytes;
  return (bytes + c - 1) / c * c;
}

std::uintptr_t address(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p); }

using clock_type = std::chrono::steady_clock;

// The engines whose pinning threads run, so that the process's exit stops them before the CUDA
// runtime tears down (a thread inside cudaHostRegister then would fault): an engine of a strategy
// that is never destroyed (libgpumem_torch's) may still be pinning a reservation when the program
// ends. Never destroyed itself, since the exit handler reads it.
struct running_pinners {
  std::mutex mu;
  std::vector<std::function<void()>*> halts;
};
running_pinners& pinners() {
  static auto* p = new running_pinners;
  return *p;
}
void halt_pinners_at_exit() {
  running_pinners& p = pinners();
  std::lock_guard<std::mutex> lock(p.mu);
  for (auto* halt : p.halts) (*halt)();
}
double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

}  // namespace

struct sleep_engine::impl {
  memory_kind kind;
  int device;
  std::vector<sleep_backup::chunk> pool;
  std::uint64_t pool_bytes = 0;
  std::uint64_t held_bytes = 0;     // every chunk the engine owns: the pool's and the backups'
  std::uint64_t pending_bytes = 0;  // granted by reserve() to backups, still to take from the pinner
  sleep_timing timing;
#ifdef GPUMEM_WITH_CUDA
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> events;
#endif

  // The pinning threads: they make chunks of pin_chunk_bytes (faulted in, registered) in the order
  // asked for, on up to max_pin_threads threads at once, and hand them over in `ready`. Each ask()
  // maps its chunks as one range first (one mmap, one madvise), so that the threads only fault pages
  // in and register, which run in parallel: a mapping per chunk takes the process's mmap lock for
  // writing each time, which stalls every other thread's faults and registrations (on an H200 host,
  // 16 GiB pinned at 5.7 GB/s by 8 threads with a mapping per 128 MiB chunk, 23.5 GB/s with one
  // mapping). Everything under `mu`; the rest of impl is under the resource's lock.
  struct pinner_state {
    std::mutex mu;
    std::condition_variable wake_worker;  // work to do, or stop
    std::condition_variable chunk_ready;  // a chunk is ready (or refused)
    std::deque<std::byte*> todo;          // chunks asked for that no thread has started (nullptr: unmapped)
    std::deque<sleep_backup::chunk> ready;  // made (base nullptr: the host refused it)
    std::uint64_t ready_bytes = 0;          // of the chunks made, those not refused
    std::uint64_t inflight = 0;  // bytes asked for and not yet taken: todo, being made, ready
    std::vector<std::thread> threads;
    std::size_t idle = 0;  // threads waiting for work
    bool stop = false;
    double fault_seconds = 0;
    double register_seconds = 0;
    std::uint64_t made_bytes = 0;
  } pin;

  bool on_host() const noexcept { return kind == memory_kind::host; }

  // Stops and joins the pinning threads (each finishes the chunk it is making); what they made stays
  // in `ready`. Run at exit (halt_pinners_at_exit) and by stop_pinning.
  std::function<void()> halt = [this] {
    {
      std::lock_guard<std::mutex> lock(pin.mu);
      pin.stop = true;
    }
    pin.wake_worker.notify_all();
    for (std::thread& t : pin.threads) {
      if (t.joinable()) t.join();
    }
  };
  bool halt_listed = false;

  // Lists `halt` for the process's exit, once, before the first thread starts.
  void list_for_exit() {
    if (halt_listed) return;
    static std::once_flag once;
    std::call_once(once, [] { std::atexit(halt_pinners_at_exit); });
    running_pinners& p = pinners();
    std::lock_guard<std::mutex> lock(p.mu);
    p.halts.push_back(&halt);
    halt_listed = true;
  }

  // `chunks` chunks of address space in one mapping, aligned to huge pages (with transparent huge
  // pages advised on a device, so that a fault maps 2 MiB); nullptr where the host refuses it.
  std::byte* map_batch(std::size_t chunks) noexcept {
    const std::size_t bytes = chunks * pin_chunk_bytes;
    void* raw =
        mmap(nullptr, bytes + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    const std::uintptr_t lo = address(raw);
    const std::uintptr_t aligned = (lo + huge_page - 1) / huge_page * huge_page;
    if (aligned > lo) munmap(raw, aligned - lo);
    const std::uintptr_t tail = lo + bytes + huge_page - (aligned + bytes);
    if (tail > 0) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
    auto* base = reinterpret_cast<std::byte*>(aligned);
    if (!on_host()) madvise(base, bytes, MADV_HUGEPAGE);
    return base;
  }

  // Asks for `chunks` more chunks; starts a thread where none is idle (up to max_pin_threads).
  void ask(std::size_t chunks) {
    if (chunks == 0) return;
    std::byte* base = map_batch(chunks);
    list_for_exit();
    std::lock_guard<std::mutex> lock(pin.mu);
    for (std::size_t i = 0; i < chunks; ++i) pin.todo.push_back(base == nullptr ? nullptr : base + i * pin_chunk_bytes);
    pin.inflight += chunks * pin_chunk_bytes;
    const unsigned cores = std::max(2u, std::thread::hardware_concurrency());
    const std::size_t most = std::min(max_pin_threads, cores - 1);
    // One thread per chunk waiting, up to `most`; those started stay (idle) for later requests.
    while (pin.threads.size() < std::min<std::size_t>(most, pin.todo.size() + (pin.threads.size() - pin.idle))) {
      try {
        pin.threads.emplace_back([this] { pin_loop(); });
      } catch (...) {
        break;  // the threads already started (or take(), where none did) do the work
      }
      ++pin.idle;  // counted until it waits: it will take a chunk
    }
    pin.wake_worker.notify_all();
  }

  // Makes the next chunk asked for (pin.todo's front), with pin.mu released while it pins, and counts
  // its time and, where the host gave it, its bytes. `lock` holds pin.mu on entry and on return.
  sleep_backup::chunk make_next(std::unique_lock<std::mutex>& lock) {
    std::byte* base = pin.todo.front();
    pin.todo.pop_front();
    lock.unlock();
    double fault = 0;
    double reg = 0;
    const sleep_backup::chunk c = make_chunk(base, fault, reg);
    lock.lock();
    pin.fault_seconds += fault;
    pin.register_seconds += reg;
    if (c.base != nullptr) pin.made_bytes += c.bytes;
    return c;
  }

  void pin_loop() {
    std::unique_lock<std::mutex> lock(pin.mu);
    for (bool first = true;; first = false) {
      if (!first) ++pin.idle;  // ask() counted a new thread idle already
      pin.wake_worker.wait(lock, [&] { return pin.stop || !pin.todo.empty(); });
      --pin.idle;
      if (pin.stop) return;
      const sleep_backup::chunk c = make_next(lock);
      if (c.base != nullptr) pin.ready_bytes += c.bytes;
      pin.ready.push_back(c);
      pin.chunk_ready.notify_all();
    }
  }

  // The next chunk asked for (waiting for it); base nullptr where the host refused it.
  sleep_backup::chunk take() {
    std::unique_lock<std::mutex> lock(pin.mu);
    if (pin.threads.empty() && pin.ready.empty() && !pin.todo.empty()) {
      // No thread could be started: the chunk is made here.
      const sleep_backup::chunk c = make_next(lock);
      pin.inflight -= c.bytes;
      return c;
    }
    pin.chunk_ready.wait(lock, [&] { return !pin.ready.empty(); });
    const sleep_backup::chunk c = pin.ready.front();
    pin.ready.pop_front();
    if (c.base != nullptr) pin.ready_bytes -= c.bytes;
    pin.inflight -= c.bytes;
    return c;
  }

  // Moves the chunks made so far into the pool, but only those no backup was granted: what is in
  // flight stays at least the backups' pending grants.
  void drain_ready() {
    std::lock_guard<std::mutex> lock(pin.mu);
    while (!pin.ready.empty() && pin.inflight >= pending_bytes + pin.ready.front().bytes) {
      const sleep_backup::chunk c = pin.ready.front();
      pin.ready.pop_front();
      pin.inflight -= c.bytes;
      if (c.base == nullptr) continue;  // refused: nothing to keep
      pin.ready_bytes -= c.bytes;
      held_bytes += c.bytes;
      pool.push_back(c);
      pool_bytes += c.bytes;
    }
  }

  std::uint64_t inflight() {
    std::lock_guard<std::mutex> lock(pin.mu);
    return pin.inflight;
  }

  // Stops the threads (each finishes the chunk it is making) and frees what they made and the
  // address space of the chunks they did not start.
  void stop_pinning() noexcept {
    if (halt_listed) {
      running_pinners& p = pinners();
      std::lock_guard<std::mutex> lock(p.mu);
      p.halts.erase(std::find(p.halts.begin(), p.halts.end(), &halt));
    }
    halt();
    pin.threads.clear();
    for (std::byte* base : pin.todo) {
      if (base != nullptr) munmap(base, pin_chunk_bytes);
    }
    pin.todo.clear();
    for (const sleep_backup::chunk& c : pin.ready) {
      if (c.base == nullptr) continue;
      held_bytes += c.bytes;  // free_chunk counts it off
      free_chunk(c);
    }
    pin.ready.clear();
  }

  // The chunk at `base` (a batch's address space; nullptr where mapping it failed) made usable, or
  // base nullptr where the host refuses it. On a device it is pinned: its pages faulted in
  // (MADV_POPULATE_WRITE, else a write per page; zeroing them is most of what pinning costs), then
  // registered with CUDA; cudaHostAlloc where either step fails. The twin's is used as mapped.
  // Called on the pinning threads: `fault` and `reg` get the seconds each step took.
  sleep_backup::chunk make_chunk(std::byte* base, double& fault, double& reg) {
    const std::size_t bytes = pin_chunk_bytes;
    if (on_host()) return {base, bytes, sleep_backup::origin::mapped};
#ifdef GPUMEM_WITH_CUDA
    device_scope scope(device);
    if (base != nullptr) {
      auto t = clock_type::now();
      if (madvise(base, bytes, MADV_POPULATE_WRITE) != 0) {
        for (std::size_t at = 0; at < bytes; at += 4096) base[at] = std::byte{0};
      }
      fault = since(t);
      t = clock_type::now();
      const CUresult status = detail::cu::HostRegister(base, bytes, cudaHostRegisterPortable);
      reg = since(t);
      if (status == CUDA_SUCCESS) return {base, bytes, sleep_backup::origin::registered};
      munmap(base, bytes);
    }
    const auto t = clock_type::now();
    void* p = nullptr;
    const CUresult status = detail::cu::HostAlloc(&p, bytes, cudaHostAllocPortable);
    reg += since(t);
    if (status != CUDA_SUCCESS) {
      return {nullptr, bytes, sleep_backup::origin::host_alloc};
    }
    return {static_cast<std::byte*>(p), bytes, sleep_backup::origin::host_alloc};
#else
    // No CUDA: copy_scope refuses device memory before any copy; the address space goes back.
    (void)fault;
    (void)reg;
    if (base != nullptr) munmap(base, bytes);
    return {nullptr, bytes, sleep_backup::origin::mapped};
#endif
  }

  void free_chunk(const sleep_backup::chunk& c) noexcept {
    held_bytes -= c.bytes;
    switch (c.from) {
      case sleep_backup::origin::registered:  // unregistered, then unmapped as a mapped chunk is
#ifdef GPUMEM_WITH_CUDA
        detail::cu::HostUnregister(c.base);
#endif
        [[fallthrough]];
      case sleep_backup::origin::mapped:
        munmap(c.base, c.bytes);
        return;
      case sleep_backup::origin::host_alloc:
#ifdef GPUMEM_WITH_CUDA
        detail::cu::FreeHost(c.base);
#endif
        return;
    }
  }

#ifdef GPUMEM_WITH_CUDA
  void ensure_stream() {
    if (stream != nullptr) return;
    check_cuda(detail::cu::StreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags (sleep copies)");
  }
  cudaEvent_t event(std::size_t i) {
    while (events.size() <= i) {
      cudaEvent_t e = nullptr;
      check_cuda(detail::cu::EventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags (sleep copies)");
      events.push_back(e);
    }
    return events[i];
  }
#endif

  // Copies one piece: to the host (save) or back to the device (restore), queued on the stream.
  void copy(const sleep_backup::piece& p, bool save) {
    void* dev = reinterpret_cast<void*>(p.addr);
    if (on_host()) {
      if (save) std::memcpy(p.host, dev, p.bytes);
      else std::memcpy(dev, p.host, p.bytes);
      return;
    }
#ifdef GPUMEM_WITH_CUDA
    check_cuda(save ? detail::cu::MemcpyAsync(p.host, dev, p.bytes, cudaMemcpyDeviceToHost, stream)
                    : detail::cu::MemcpyAsync(dev, p.host, p.bytes, cudaMemcpyHostToDevice, stream),
               save ? "cudaMemcpyAsync (sleep: device to host)" : "cudaMemcpyAsync (wake: host to device)");
#endif
  }

  // What one call's copies need: the engine's device current and its stream made (nothing on the
  // host twin). Throws invalid_state where the build has no CUDA and the memory is not the host's.
  struct copy_scope {
#ifdef GPUMEM_WITH_CUDA
    std::optional<device_scope> current;
#endif
    explicit copy_scope(impl& m) {
      if (m.on_host()) return;
#ifdef GPUMEM_WITH_CUDA
      current.emplace(m.device);
      m.ensure_stream();
#else
      throw invalid_state("sleep: this build has no CUDA, so it cannot copy device memory");
#endif
    }
  };

  void synchronize_stream() noexcept {
#ifdef GPUMEM_WITH_CUDA
    if (!on_host() && stream != nullptr) detail::cu::StreamSynchronize(stream);
#endif
  }
};

sleep_engine::sleep_engine(memory_kind kind, int device) : impl_(std::make_unique<impl>()) {
  impl_->kind = kind;
  impl_->device = device;
}

sleep_engine::~sleep_engine() {
  impl_->stop_pinning();
  trim();
#ifdef GPUMEM_WITH_CUDA
  if (!impl_->on_host()) {
    for (cudaEvent_t e : impl_->events) detail::cu::EventDestroy(e);
    if (impl_->stream != nullptr) detail::cu::StreamDestroy(impl_->stream);
  }
#endif
}

sleep_backup sleep_engine::reserve(std::uint64_t bytes, const resource_stats& stats) {
  sleep_backup backup;
  if (bytes == 0) return backup;
  impl& m = *impl_;
  m.drain_ready();
  // The pool first: the smallest chunk that holds it all, else the largest chunks until it does.
  std::sort(m.pool.begin(), m.pool.end(), [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
  std::uint64_t taken = 0;
  const auto fits = std::find_if(m.pool.begin(), m.pool.end(), [&](const auto& c) { return c.bytes >= bytes; });
  if (fits != m.pool.end()) {
    backup.chunks_.push_back(*fits);
    taken = fits->bytes;
    m.pool.erase(fits);
  } else {
    while (!m.pool.empty() && taken < bytes) {
      backup.chunks_.push_back(m.pool.back());
      taken += m.pool.back().bytes;
      m.pool.pop_back();
    }
  }
  m.pool_bytes -= taken;
  m.timing.pooled_bytes += taken;
  backup.held_ = taken;
  if (taken >= bytes) return backup;

  // Chunks being pinned that no backup was granted (a reservation) count first; the pinning threads
  // get the rest.
  const std::uint64_t need = round_chunks(bytes - taken);
  const std::uint64_t inflight = m.inflight();
  const std::uint64_t unclaimed = inflight > m.pending_bytes ? inflight - m.pending_bytes : 0;
  const std::uint64_t more = need > unclaimed ? need - unclaimed : 0;
  try {
    check_limit(more, bytes, stats);
  } catch (...) {
    recycle(backup);
    throw;
  }
  backup.pending_ = need;
  m.pending_bytes += need;
  m.ask(static_cast<std::size_t>(more / pin_chunk_bytes));
  return backup;
}

void sleep_engine::reserve_ahead(std::uint64_t bytes, const resource_stats& stats) {
  impl& m = *impl_;
  m.drain_ready();
  const std::uint64_t inflight = m.inflight();
  const std::uint64_t have = m.pool_bytes + (inflight > m.pending_bytes ? inflight - m.pending_bytes : 0);
  if (have >= bytes) return;
  const std::uint64_t more = round_chunks(bytes - have);
  check_limit(more, bytes, stats);
  m.ask(static_cast<std::size_t>(more / pin_chunk_bytes));
}

// Throws out_of_memory when `more` host bytes, on top of what is held and being pinned, would pass
// the limit (or, unset, MemAvailable less 10% of MemTotal). `bytes` is the caller's need.
void sleep_engine::check_limit(std::uint64_t more, std::uint64_t bytes, const resource_stats& stats) {
  if (more == 0) return;
  impl& m = *impl_;
  const std::uint64_t inflight = m.inflight();
  std::string refused;
  if (limit_) {
    if (m.held_bytes + inflight + more > *limit_) refused = "past backupLimitBytes " + format_bytes_brief(*limit_);
  } else if (const auto info = read_host_memory_info()) {
    if (inflight + more > default_pinned_cap(*info)) {
      refused = "past MemAvailable " + format_bytes_brief(info->available_bytes) + " less 10% of MemTotal " +
                format_bytes_brief(info->total_bytes);
    }
  }
  if (refused.empty()) return;
  throw out_of_memory("sleep: the host memory to keep " + format_bytes_brief(bytes) + " is short: " +
                          format_bytes_brief(more) + " more needed (" + format_bytes_brief(m.held_bytes + inflight) +
                          " held or being pinned for backups already), " + refused + ";",
                      bytes, stats);
}

void sleep_engine::quiesce() {
  const auto start = clock_type::now();
  if (impl_->on_host()) {
    synchronize_host_streams();  // the twin of the device's: work queued on a host stream runs first
  } else {
#ifdef GPUMEM_WITH_CUDA
    device_scope scope(impl_->device);
    check_cuda(detail::cu::DeviceSynchronize(), "cudaDeviceSynchronize (sleep)");
#endif
  }
  impl_->timing.quiesce_seconds += since(start);
}

void sleep_engine::begin_timing() noexcept {
  impl_->timing = sleep_timing{};
  std::lock_guard<std::mutex> lock(impl_->pin.mu);
  impl_->timing.fault_seconds = -impl_->pin.fault_seconds;
  impl_->timing.register_seconds = -impl_->pin.register_seconds;
  impl_->timing.pinned_bytes = 0 - impl_->pin.made_bytes;
}

sleep_timing sleep_engine::end_timing() noexcept {
  sleep_timing t = impl_->timing;
  std::lock_guard<std::mutex> lock(impl_->pin.mu);
  t.fault_seconds += impl_->pin.fault_seconds;
  t.register_seconds += impl_->pin.register_seconds;
  t.pinned_bytes += impl_->pin.made_bytes;
  return t;
}

void sleep_engine::save_and_release(sleep_backup& backup, const std::vector<sleep_span>& spans,
                                    const std::vector<sleep_unit>& units,
                                    const std::function<void(const sleep_unit&)>& release, const resource_stats& stats) {
  impl& m = *impl_;
  const impl::copy_scope scope(m);
  // Lay the spans out over the backup's chunks in pieces of at most copy_piece_bytes, allocating the
  // pending memory a chunk at a time, and queue each piece's copy at once (with an event after it on
  // a device), so that the host pins the next chunk while the link copies the last. Nothing is
  // released before every copy is queued: a failure here changes nothing.
  backup.pieces_.clear();
  std::size_t chunk = 0;
  std::size_t used = 0;
  try {
    for (const sleep_span& s : spans) {
      std::uintptr_t at = address(s.addr);
      std::size_t left = s.bytes;
      while (left > 0) {
        if (chunk < backup.chunks_.size() && backup.chunks_[chunk].bytes == used) {
          ++chunk;
          used = 0;
        }
        if (chunk == backup.chunks_.size()) {
          if (backup.pending_ == 0) throw invalid_state("sleep: the backup is smaller than the content to keep (an internal error)");
          const auto waited = clock_type::now();
          const sleep_backup::chunk made = m.take();
          m.timing.backup_wait_seconds += since(waited);
          backup.pending_ -= made.bytes;
          m.pending_bytes -= made.bytes;
          if (made.base == nullptr) {
            throw out_of_memory("sleep: the host refused " + format_bytes_brief(made.bytes) +
                                    (m.on_host() ? "" : " of pinned memory") + " for the backup (" +
                                    format_bytes_brief(m.held_bytes) + " held for backups already);",
                                made.bytes, stats);
          }
          backup.chunks_.push_back(made);
          backup.held_ += made.bytes;
          m.held_bytes += made.bytes;
        }
        const std::size_t n = std::min({left, backup.chunks_[chunk].bytes - used, copy_piece_bytes});
        backup.pieces_.push_back({at, n, backup.chunks_[chunk].base + used});
        const auto queued = clock_type::now();
        m.copy(backup.pieces_.back(), true);
#ifdef GPUMEM_WITH_CUDA
        if (!m.on_host()) check_cuda(detail::cu::EventRecord(m.event(backup.pieces_.size() - 1), m.stream), "cudaEventRecord (sleep)");
#endif
        m.timing.queue_seconds += since(queued);
        at += n;
        left -= n;
        used += n;
      }
    }
  } catch (...) {
    m.synchronize_stream();
    backup.pieces_.clear();
    throw;
  }
  // Release each unit once the last piece that reads it has copied, while the later pieces copy.
  std::size_t p = 0;
  int failed = 0;
  for (const sleep_unit& u : units) {
    const std::uintptr_t lo = address(u.addr);
    const std::uintptr_t hi = lo + u.bytes;
    while (p < backup.pieces_.size() && backup.pieces_[p].addr + backup.pieces_[p].bytes <= lo) ++p;
    std::size_t last = p;
    while (last < backup.pieces_.size() && backup.pieces_[last].addr < hi) ++last;
#ifdef GPUMEM_WITH_CUDA
    if (!m.on_host() && last > p) {
      const auto waited = clock_type::now();
      const CUresult status = detail::cu::EventSynchronize(m.events[last - 1]);
      m.timing.copy_wait_seconds += since(waited);
      if (status != CUDA_SUCCESS && failed == 0) failed = static_cast<int>(status);
    }
#endif
    const auto released = clock_type::now();
    release(u);
    m.timing.release_seconds += since(released);
  }
#ifdef GPUMEM_WITH_CUDA
  if (failed != 0) {
    backup.pieces_.clear();
    check_cuda(static_cast<CUresult>(failed), "sleep: copying to host memory");
  }
#else
  (void)failed;
#endif
}

void sleep_engine::map_and_restore(sleep_backup& backup, const std::vector<sleep_unit>& units,
                                   const std::function<void(const sleep_unit&)>& map,
                                   const std::function<void(const sleep_unit&)>& release, bool retain) {
  impl& m = *impl_;
  const impl::copy_scope scope(m);
  std::size_t mapped = 0;
  std::size_t next = 0;  // the first piece not yet copied back
  try {
    for (; mapped < units.size(); ++mapped) {
      map(units[mapped]);
      // Every piece that ends within the units mapped so far can go now.
      const std::uintptr_t hi = address(units[mapped].addr) + units[mapped].bytes;
      for (; next < backup.pieces_.size() && backup.pieces_[next].addr + backup.pieces_[next].bytes <= hi; ++next) {
        m.copy(backup.pieces_[next], false);
      }
    }
    for (; next < backup.pieces_.size(); ++next) m.copy(backup.pieces_[next], false);
#ifdef GPUMEM_WITH_CUDA
    if (!m.on_host()) check_cuda(detail::cu::StreamSynchronize(m.stream), "wake: copying back from host memory");
#endif
  } catch (...) {
    m.synchronize_stream();
    for (std::size_t u = 0; u < mapped; ++u) release(units[u]);
    throw;
  }
  if (!retain) recycle(backup);
}

void sleep_engine::recycle(sleep_backup& backup) noexcept {
  for (const auto& c : backup.chunks_) {
    impl_->pool.push_back(c);
    impl_->pool_bytes += c.bytes;
  }
  impl_->pending_bytes -= backup.pending_;
  backup.chunks_.clear();
  backup.pieces_.clear();
  backup.held_ = 0;
  backup.pending_ = 0;
}

std::uint64_t sleep_engine::pool_bytes() const noexcept {
  std::lock_guard<std::mutex> lock(impl_->pin.mu);
  // Chunks made that no backup was granted join the pool at the next reserve.
  const std::uint64_t granted_ready = std::min(impl_->pin.ready_bytes, impl_->pending_bytes);
  return impl_->pool_bytes + impl_->pin.ready_bytes - granted_ready;
}

std::uint64_t sleep_engine::pinning_bytes() const noexcept {
  std::lock_guard<std::mutex> lock(impl_->pin.mu);
  return impl_->pin.inflight - impl_->pin.ready_bytes;
}

void sleep_engine::trim() noexcept {
  impl_->drain_ready();
  for (const auto& c : impl_->pool) impl_->free_chunk(c);
  impl_->pool.clear();
  impl_->pool_bytes = 0;
}

}  // namespace gpumem::detail
