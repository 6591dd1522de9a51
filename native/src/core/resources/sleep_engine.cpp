#include "sleep_engine.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "../cuda_check.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/pinned_host_resource.hpp"  // read_host_memory_info, default_pinned_cap

namespace gpumem::detail {

namespace {

constexpr std::size_t chunk_rounding = std::size_t{2} << 20;

std::size_t round_chunk(std::uint64_t bytes) {
  return static_cast<std::size_t>((bytes + chunk_rounding - 1) / chunk_rounding * chunk_rounding);
}

std::uintptr_t address(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

std::uint64_t sleep_backup::saved_bytes() const noexcept {
  std::uint64_t total = 0;
  for (const piece& p : pieces_) total += p.bytes;
  return total;
}

void sleep_backup::forget(const void* addr, std::size_t bytes) noexcept {
  const std::uintptr_t lo = address(addr);
  const std::uintptr_t hi = lo + bytes;
  pieces_.erase(std::remove_if(pieces_.begin(), pieces_.end(),
                               [&](const piece& p) { return p.addr >= lo && p.addr + p.bytes <= hi; }),
                pieces_.end());
}

bool sleep_backup::read(const void* addr, std::size_t bytes, void* out) const noexcept {
  if (bytes == 0) return false;
  const std::uintptr_t lo = address(addr);
  const std::uintptr_t hi = lo + bytes;
  // The pieces are sorted by address: the first that ends past lo, then contiguous ones up to hi.
  const auto first = std::upper_bound(pieces_.begin(), pieces_.end(), lo,
                                      [](std::uintptr_t a, const piece& p) { return a < p.addr + p.bytes; });
  std::uintptr_t at = lo;
  for (auto p = first; at < hi; ++p) {
    if (p == pieces_.end() || p->addr > at) return false;  // a gap: not all of it was saved
    at = std::min<std::uintptr_t>(hi, p->addr + p->bytes);
  }
  at = lo;
  for (auto p = first; at < hi; ++p) {
    const std::uintptr_t end = std::min<std::uintptr_t>(hi, p->addr + p->bytes);
    std::memcpy(static_cast<std::byte*>(out) + (at - lo), p->host + (at - p->addr), end - at);
    at = end;
  }
  return true;
}

struct sleep_engine::impl {
  memory_kind kind;
  int device;
  std::vector<sleep_backup::chunk> pool;
  std::uint64_t pool_bytes = 0;
  std::uint64_t held_bytes = 0;     // every chunk alive: the pool's and the backups'
  std::uint64_t pending_bytes = 0;  // granted by reserve() to backups, not allocated yet
#ifdef GPUMEM_WITH_CUDA
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> events;
#endif

  bool on_host() const noexcept { return kind == memory_kind::host; }

  // Host memory for a chunk, or nullptr where the host refuses it. On a device it is pinned: mapped
  // with transparent huge pages advised, its pages faulted in by several threads at once (zeroing
  // them is most of what pinning costs), then registered with CUDA; cudaHostAlloc where that fails.
  sleep_backup::chunk allocate_chunk(std::size_t bytes) {
    if (on_host()) return {static_cast<std::byte*>(std::malloc(bytes)), bytes, false};
#ifdef GPUMEM_WITH_CUDA
    device_scope scope(device);
    void* mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mapped != MAP_FAILED) {
      madvise(mapped, bytes, MADV_HUGEPAGE);
      fault_in(static_cast<std::byte*>(mapped), bytes);
      if (cudaHostRegister(mapped, bytes, cudaHostRegisterDefault) == cudaSuccess) {
        return {static_cast<std::byte*>(mapped), bytes, true};
      }
      cudaGetLastError();
      munmap(mapped, bytes);
    }
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) != cudaSuccess) {
      cudaGetLastError();
      return {nullptr, bytes, false};
    }
    return {static_cast<std::byte*>(p), bytes, false};
#else
    throw invalid_state("sleep: this build has no CUDA, so it cannot copy device memory");
#endif
  }

  // Touches every page of [base, base + bytes) from up to 8 threads. A thread that cannot start
  // leaves its share to the calling thread.
  static void fault_in(std::byte* base, std::size_t bytes) noexcept {
    constexpr std::size_t page = 4096;
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    const std::size_t parts = std::min<std::size_t>({8, cores, std::max<std::size_t>(1, bytes >> 27)});
    const std::size_t share = (bytes / parts + page - 1) / page * page;
    const auto touch = [base, bytes](std::size_t from, std::size_t to) {
      for (std::size_t at = from; at < std::min(to, bytes); at += page) base[at] = std::byte{0};
    };
    std::vector<std::thread> threads;
    for (std::size_t i = 1; i < parts; ++i) {
      try {
        threads.emplace_back(touch, i * share, (i + 1) * share);
      } catch (...) {
        touch(i * share, (i + 1) * share);
      }
    }
    touch(0, share);
    for (std::thread& t : threads) t.join();
  }

  void free_chunk(const sleep_backup::chunk& c) noexcept {
    held_bytes -= c.bytes;
    if (on_host()) {
      std::free(c.base);
      return;
    }
#ifdef GPUMEM_WITH_CUDA
    if (c.registered) {
      cudaHostUnregister(c.base);
      munmap(c.base, c.bytes);
    } else {
      cudaFreeHost(c.base);
    }
#endif
  }

#ifdef GPUMEM_WITH_CUDA
  void ensure_stream() {
    if (stream != nullptr) return;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags (sleep copies)");
  }
  cudaEvent_t event(std::size_t i) {
    while (events.size() <= i) {
      cudaEvent_t e = nullptr;
      check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags (sleep copies)");
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
    check_cuda(save ? cudaMemcpyAsync(p.host, dev, p.bytes, cudaMemcpyDeviceToHost, stream)
                    : cudaMemcpyAsync(dev, p.host, p.bytes, cudaMemcpyHostToDevice, stream),
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
    if (!on_host() && stream != nullptr) cudaStreamSynchronize(stream);
#endif
  }
};

sleep_engine::sleep_engine(memory_kind kind, int device) : impl_(std::make_unique<impl>()) {
  impl_->kind = kind;
  impl_->device = device;
}

sleep_engine::~sleep_engine() {
  trim();
#ifdef GPUMEM_WITH_CUDA
  if (!impl_->on_host()) {
    for (cudaEvent_t e : impl_->events) cudaEventDestroy(e);
    if (impl_->stream != nullptr) cudaStreamDestroy(impl_->stream);
  }
#endif
}

sleep_backup sleep_engine::reserve(std::uint64_t bytes, const resource_stats& stats) {
  sleep_backup backup;
  if (bytes == 0) return backup;
  impl& m = *impl_;
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
  backup.held_ = taken;
  if (taken >= bytes) return backup;

  const std::size_t need = std::max(round_chunk(bytes - taken), min_chunk_bytes);
  const std::uint64_t committed = m.held_bytes + m.pending_bytes;  // held, and granted to other backups
  std::string refused;
  if (limit_) {
    if (committed + need > *limit_) refused = "past backupLimitBytes " + format_bytes_brief(*limit_);
  } else if (const auto info = read_host_memory_info()) {
    if (m.pending_bytes + need > default_pinned_cap(*info)) {
      refused = "past MemAvailable " + format_bytes_brief(info->available_bytes) + " less 10% of MemTotal " +
                format_bytes_brief(info->total_bytes);
    }
  }
  if (!refused.empty()) {
    recycle(backup);
    throw out_of_memory("sleep: the host memory to keep " + format_bytes_brief(bytes) + " is short: " +
                            format_bytes_brief(need) + " more needed (" + format_bytes_brief(m.held_bytes) +
                            " held for backups already), " + refused + ";",
                        bytes, stats);
  }
  backup.pending_ = need;
  m.pending_bytes += need;
  return backup;
}

void sleep_engine::quiesce() {
  if (impl_->on_host()) return;
#ifdef GPUMEM_WITH_CUDA
  device_scope scope(impl_->device);
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (sleep)");
#endif
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
          const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(backup.pending_, grow_chunk_bytes));
          const sleep_backup::chunk made = m.allocate_chunk(n);
          if (made.base == nullptr) {
            throw out_of_memory("sleep: the host refused " + format_bytes_brief(n) + (m.on_host() ? "" : " of pinned memory") +
                                    " for the backup (" + format_bytes_brief(m.held_bytes) + " held for backups already);",
                                n, stats);
          }
          backup.chunks_.push_back(made);
          backup.held_ += n;
          backup.pending_ -= n;
          m.pending_bytes -= n;
          m.held_bytes += n;
        }
        const std::size_t n = std::min({left, backup.chunks_[chunk].bytes - used, copy_piece_bytes});
        backup.pieces_.push_back({at, n, backup.chunks_[chunk].base + used});
        m.copy(backup.pieces_.back(), true);
#ifdef GPUMEM_WITH_CUDA
        if (!m.on_host()) check_cuda(cudaEventRecord(m.event(backup.pieces_.size() - 1), m.stream), "cudaEventRecord (sleep)");
#endif
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
      const cudaError_t status = cudaEventSynchronize(m.events[last - 1]);
      if (status != cudaSuccess && failed == 0) failed = static_cast<int>(status);
    }
#endif
    release(u);
  }
#ifdef GPUMEM_WITH_CUDA
  if (failed != 0) {
    backup.pieces_.clear();
    check_cuda(static_cast<cudaError_t>(failed), "sleep: copying to host memory");
  }
#else
  (void)failed;
#endif
}

void sleep_engine::map_and_restore(sleep_backup& backup, const std::vector<sleep_unit>& units,
                                   const std::function<void(const sleep_unit&)>& map,
                                   const std::function<void(const sleep_unit&)>& release) {
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
    if (!m.on_host()) check_cuda(cudaStreamSynchronize(m.stream), "wake: copying back from host memory");
#endif
  } catch (...) {
    m.synchronize_stream();
    for (std::size_t u = 0; u < mapped; ++u) release(units[u]);
    throw;
  }
  recycle(backup);
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

std::uint64_t sleep_engine::pool_bytes() const noexcept { return impl_->pool_bytes; }

void sleep_engine::trim() noexcept {
  for (const auto& c : impl_->pool) impl_->free_chunk(c);
  impl_->pool.clear();
  impl_->pool_bytes = 0;
}

// ---------------------------------------------------------------------------------------------
// tag_book

void tag_book::on_allocate(tag_id tag) {
  if (entry* e = find(tag)) {
    if (e->asleep) {
      throw invalid_state("tag '" + tag_name(tag) + "' is asleep: wake it before allocating in it");
    }
    return;
  }
  entry e;
  e.tag = tag;
  entries_.push_back(std::move(e));
}

bool tag_book::asleep(tag_id tag) const noexcept {
  for (const entry& e : entries_) {
    if (e.tag == tag) return e.asleep;
  }
  return false;
}

tag_book::entry* tag_book::find(tag_id tag) noexcept {
  for (entry& e : entries_) {
    if (e.tag == tag) return &e;
  }
  return nullptr;
}

void tag_book::check_known(const std::vector<tag_id>& tags, const char* strategy) const {
  for (const tag_id t : tags) {
    const bool known = std::any_of(entries_.begin(), entries_.end(), [&](const entry& e) { return e.tag == t; });
    if (known) continue;
    std::string list;
    for (const entry& e : entries_) list += (list.empty() ? "'" : ", '") + tag_name(e.tag) + "'";
    std::string name;
    try {
      name = tag_name(t);
    } catch (const invalid_argument&) {
      name = "#" + std::to_string(t);
    }
    throw invalid_argument(invalid_argument::kind::range, "tags",
                           std::string(strategy) + ": no allocation was ever tagged '" + name + "'; the tags it knows: " +
                               (list.empty() ? std::string("none yet") : list));
  }
}

std::vector<std::pair<tag_id, sleep_mode>> tag_book::plan_sleep(const sleep_request& request, sleep_report& report,
                                                                 const char* strategy) const {
  check_known(request.tags, strategy);
  check_known(request.keep, strategy);
  std::vector<std::pair<tag_id, sleep_mode>> plan;
  for (const entry& e : entries_) {
    const bool named = request.tags.empty() ||
                       std::find(request.tags.begin(), request.tags.end(), e.tag) != request.tags.end();
    if (!named) continue;
    if (e.asleep) {
      report.unchanged.push_back(e.tag);
      continue;
    }
    const bool keep = request.keep_all || std::find(request.keep.begin(), request.keep.end(), e.tag) != request.keep.end();
    plan.emplace_back(e.tag, keep ? sleep_mode::keep : sleep_mode::discard);
  }
  return plan;
}

std::vector<tag_id> tag_book::plan_wake(const std::vector<tag_id>& tags, sleep_report& report, const char* strategy) const {
  check_known(tags, strategy);
  std::vector<tag_id> plan;
  for (const entry& e : entries_) {
    const bool named = tags.empty() || std::find(tags.begin(), tags.end(), e.tag) != tags.end();
    if (!named) continue;
    if (!e.asleep) {
      if (!tags.empty()) report.unchanged.push_back(e.tag);
      continue;
    }
    plan.push_back(e.tag);
  }
  return plan;
}

}  // namespace gpumem::detail
