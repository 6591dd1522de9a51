// The shared-memory communicator: see host_communicator.hpp.
#include "host_communicator.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "comm_errors.hpp"
#include "core/cuda_runtime_check.hpp"
#include "gpumem/errors.hpp"

namespace gpumem::comm {
namespace {

constexpr std::uint64_t region_magic = 0x31636d6f636d6d67ull;  // "gmmcomc1"
constexpr std::uint32_t layout_version = 3;
constexpr std::size_t reason_bytes = 1024;
constexpr std::size_t line = 64;

// Lock-free atomics are address-free: they work between processes mapping the same memory.
static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::uint32_t>::is_always_lock_free &&
              std::atomic<std::int32_t>::is_always_lock_free);

struct region_header {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t size;
  std::uint64_t slot_bytes;
  std::uint64_t total_bytes;
  std::atomic<std::uint32_t> abort_state;  // 0 none, 1 being written, 2 set (reason and rank readable)
  std::atomic<std::int32_t> failed_rank;   // the rank named by the abort; -1 for none
  std::atomic<std::uint32_t> attaches;     // attaches so far (never decreases)
  std::uint32_t unlink_when_attached;      // 1: the attach that makes `attaches` reach `size` removes the name
  std::int32_t creator_pid;                // the process that created the region (the launcher)
  char abort_reason[reason_bytes];
};

// One per rank, each on its own cache line.
struct alignas(line) rank_state {
  std::atomic<std::uint64_t> arrived;   // barriers the rank has entered
  std::atomic<std::uint32_t> attached;  // 1 while a communicator holds the rank
};

constexpr std::uint64_t round_up(std::uint64_t n, std::uint64_t to) { return (n + to - 1) / to * to; }
constexpr std::uint64_t states_offset = round_up(sizeof(region_header), line);
std::uint64_t slots_offset(int size) { return round_up(states_offset + sizeof(rank_state) * size, line); }

[[noreturn]] void fail_errno(const std::string& what) { throw error(what + " failed: " + std::strerror(errno)); }

void check_name(const std::string& name) {
  if (name.size() < 2 || name.size() > 250 || name[0] != '/' || name.find('/', 1) != std::string::npos) {
    throw invalid_argument(invalid_argument::kind::type, "name",
                           "Expected a shared-memory region name ('/name', at most 250 characters, no other '/') for name but received '" +
                               name + "'");
  }
}

void check_size(int size) {
  if (size < 1 || size > max_host_ranks) {
    throw invalid_argument(invalid_argument::kind::range, "size",
                           "Expected an integer in [1, " + std::to_string(max_host_ranks) + "] for size but received " +
                               std::to_string(size));
  }
}

// A mapping of a whole region, unmapped on destruction.
struct mapping {
  void* base = nullptr;
  std::size_t bytes = 0;
  mapping() = default;
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;
  ~mapping() {
    if (base != nullptr) munmap(base, bytes);
  }
  region_header& header() const { return *static_cast<region_header*>(base); }
  rank_state& state(int rank) const {
    return reinterpret_cast<rank_state*>(static_cast<char*>(base) + states_offset)[rank];
  }
};

// Maps the existing region `name` and checks that it is one.
void open_region(const std::string& name, mapping& m) {
  check_name(name);
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    if (errno == ENOENT) throw invalid_argument(invalid_argument::kind::type, "name", "no host communicator region named '" + name + "'");
    fail_errno("shm_open('" + name + "')");
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    close(fd);
    errno = e;
    fail_errno("fstat('" + name + "')");
  }
  const auto bytes = static_cast<std::uint64_t>(st.st_size);
  void* base = bytes >= sizeof(region_header) ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  const int e = errno;
  close(fd);
  if (bytes < sizeof(region_header)) throw invalid_argument(invalid_argument::kind::type, "name", "'" + name + "' is not a host communicator region");
  errno = e;
  if (base == MAP_FAILED) fail_errno("mmap('" + name + "')");
  m.base = base;
  m.bytes = bytes;
  const region_header& h = m.header();
  if (h.magic != region_magic || h.version != layout_version || h.total_bytes != bytes || h.size < 1 ||
      h.size > static_cast<std::uint32_t>(max_host_ranks) || slots_offset(static_cast<int>(h.size)) + h.size * h.slot_bytes != bytes) {
    throw invalid_argument(invalid_argument::kind::type, "name", "'" + name + "' is not a host communicator region of this version");
  }
}

// Records the first abort; later ones are ignored.
void record_abort(region_header& h, int rank, const std::string& reason) {
  std::uint32_t expected = 0;
  if (!h.abort_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;
  h.failed_rank.store(rank, std::memory_order_relaxed);
  const std::size_t n = std::min(reason.size(), reason_bytes - 1);
  std::memcpy(h.abort_reason, reason.data(), n);
  h.abort_reason[n] = '\0';
  h.abort_state.store(2, std::memory_order_release);
}

// Throws comm_aborted if the region was aborted.
void check_abort(const region_header& h) {
  if (h.abort_state.load(std::memory_order_acquire) != 2) return;
  const int rank = h.failed_rank.load(std::memory_order_relaxed);
  const std::string reason(h.abort_reason);
  throw comm_aborted(rank >= 0 ? "aborted: rank " + std::to_string(rank) + " failed: " + reason : "aborted: " + reason);
}

// True when the process that created the region has exited: a group whose launcher is gone must
// not wait for ranks that will never come (where the kernel does not kill them with it).
bool creator_gone(const region_header& h) {
  return h.creator_pid > 0 && kill(static_cast<pid_t>(h.creator_pid), 0) != 0 && errno == ESRCH;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

[[noreturn]] void count_error(std::uint64_t count, const char* why) {
  throw invalid_argument(invalid_argument::kind::range, "count",
                         std::string("Expected ") + why + " for count but received " + std::to_string(count));
}

void check_pointer(const void* p, const char* name) {
  if (p == nullptr) {
    throw invalid_argument(invalid_argument::kind::type, name, std::string("Expected a pointer for ") + name + " but received null");
  }
}

// The regions this process created, still mapped: the parent aborts through its own mapping,
// which outlives the region's name.
struct created_regions {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<mapping>> by_name;
};

created_regions& created() {
  static auto* regions = new created_regions();  // never destroyed: usable during static destruction
  return *regions;
}

}  // namespace

struct host_communicator::region {
  mapping map;
};

std::string create_host_region(int size, std::uint64_t slot_bytes, bool unlink_when_attached) {
  check_size(size);
  if (slot_bytes < 64 || slot_bytes % 4 != 0 || slot_bytes > (1ull << 40)) {
    throw invalid_argument(invalid_argument::kind::range, "slotBytes",
                           "Expected a multiple of 4 in [64, 2^40] for slotBytes but received " + std::to_string(slot_bytes));
  }
  const std::uint64_t total = slots_offset(size) + static_cast<std::uint64_t>(size) * slot_bytes;
  static std::atomic<std::uint64_t> counter{0};
  std::random_device random;
  std::string name;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    name = "/gpumem-" + std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1)) + "-" + std::to_string(random());
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && (errno != EEXIST || attempt >= 16)) fail_errno("shm_open('" + name + "', O_CREAT | O_EXCL)");
  }
  auto m = std::make_unique<mapping>();
  void* base = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(total)) == 0) base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name.c_str());
    errno = e;
    fail_errno("creating the host communicator region '" + name + "' of " + format_bytes(total));
  }
  m->base = base;
  m->bytes = total;
  // The file reads as zeros; the atomics are constructed in place.
  auto* h = new (base) region_header{};
  h->magic = region_magic;
  h->version = layout_version;
  h->size = static_cast<std::uint32_t>(size);
  h->slot_bytes = slot_bytes;
  h->total_bytes = total;
  h->failed_rank.store(-1);
  h->unlink_when_attached = unlink_when_attached ? 1 : 0;
  h->creator_pid = static_cast<std::int32_t>(getpid());
  for (int r = 0; r < size; ++r) new (&m->state(r)) rank_state{};
  try {
    created_regions& c = created();
    std::lock_guard<std::mutex> lock(c.mutex);
    c.by_name[name] = std::move(m);
  } catch (...) {
    shm_unlink(name.c_str());
    throw;
  }
  return name;
}

void abort_host_region(const std::string& name, int rank, const std::string& reason) {
  check_name(name);
  created_regions& c = created();
  std::unique_lock<std::mutex> lock(c.mutex);
  mapping opened;
  const mapping* m = nullptr;
  if (auto it = c.by_name.find(name); it != c.by_name.end()) {
    m = it->second.get();
  } else {
    lock.unlock();
    open_region(name, opened);
    m = &opened;
  }
  if (rank < -1 || rank >= static_cast<int>(m->header().size)) {
    throw invalid_argument(invalid_argument::kind::range, "rank",
                           "Expected an integer in [-1, " + std::to_string(m->header().size - 1) + "] for rank but received " + std::to_string(rank));
  }
  record_abort(m->header(), rank, reason);
}

bool unlink_host_region(const std::string& name) {
  check_name(name);
  {
    created_regions& c = created();
    std::lock_guard<std::mutex> lock(c.mutex);
    c.by_name.erase(name);
  }
  if (shm_unlink(name.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  fail_errno("shm_unlink('" + name + "')");
}

host_communicator::host_communicator(const std::string& name, int size, int rank, int device, std::uint64_t timeout_ms)
    : size_(size), rank_(rank), device_(device), timeout_ms_(timeout_ms) {
  check_size(size);
  if (rank < 0 || rank >= size) {
    throw invalid_argument(invalid_argument::kind::range, "rank",
                           "Expected an integer in [0, " + std::to_string(size - 1) + "] for rank but received " + std::to_string(rank));
  }
  if (device < -1) {
    throw invalid_argument(invalid_argument::kind::range, "device", "Expected -1 (the host) or a CUDA device index for device but received " + std::to_string(device));
  }
#ifndef GPUMEM_WITH_CUDA
  if (device >= 0) throw invalid_state("a host communicator over CUDA device memory needs a build of gpumem with CUDA support");
#endif
  auto r = std::make_unique<region>();
  open_region(name, r->map);
  region_header& h = r->map.header();
  if (h.size != static_cast<std::uint32_t>(size)) {
    throw invalid_argument(invalid_argument::kind::range, "size",
                           "Expected " + std::to_string(h.size) + " (the ranks of region '" + name + "') for size but received " + std::to_string(size));
  }
  if (r->map.state(rank).attached.exchange(1, std::memory_order_acq_rel) != 0) {
    throw invalid_state("rank " + std::to_string(rank) + " of the host communicator region '" + name + "' is already attached");
  }
  slot_bytes_ = h.slot_bytes;
  barriers_ = r->map.state(rank).arrived.load(std::memory_order_acquire);
  // The attach that completes the group removes the name (when the parent asked for it): the
  // region then lives exactly as long as some process maps it. Another process may have removed it
  // already (the parent's dispose): that is fine.
  if (h.attaches.fetch_add(1, std::memory_order_acq_rel) + 1 == h.size && h.unlink_when_attached != 0) shm_unlink(name.c_str());
  region_ = r.release();
}

host_communicator::~host_communicator() { destroy(); }

void host_communicator::destroy() noexcept {
  if (region_ == nullptr) return;
  region_->map.state(rank_).attached.store(0, std::memory_order_release);
  delete region_;
  region_ = nullptr;
}

void host_communicator::abort(const std::string& reason) {
  if (region_ == nullptr) throw invalid_state("this host communicator has been destroyed");
  record_abort(region_->map.header(), rank_, reason);
}

float* host_communicator::slot(int rank) const {
  return reinterpret_cast<float*>(static_cast<char*>(region_->map.base) + slots_offset(size_) + slot_bytes_ * rank);
}

void host_communicator::begin(const char* op, stream_handle stream) {
  if (region_ == nullptr) throw invalid_state(std::string("this host communicator has been destroyed (") + op + ")");
  check_abort(region_->map.header());
  stream_ = stream;
#ifdef GPUMEM_WITH_CUDA
  // The buffers are stream-ordered: work queued before the collective must be done.
  if (device_ >= 0) detail::check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
#endif
}

void host_communicator::barrier(const char* op) {
  const region_header& h = region_->map.header();
  const std::uint64_t target = ++barriers_;
  region_->map.state(rank_).arrived.store(target, std::memory_order_release);
  const auto start = std::chrono::steady_clock::now();
  for (unsigned spins = 0;; ++spins) {
    check_abort(h);
    bool all = true;
    for (int r = 0; r < size_ && all; ++r) all = region_->map.state(r).arrived.load(std::memory_order_acquire) >= target;
    if (all) return;
    if (spins < 4096) {
      cpu_relax();
      continue;
    }
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    if (timeout_ms_ > 0 && static_cast<std::uint64_t>(waited.count()) >= timeout_ms_) {
      std::string missing;
      for (int r = 0; r < size_; ++r) {
        if (region_->map.state(r).arrived.load(std::memory_order_acquire) < target) missing += (missing.empty() ? "" : ",") + std::to_string(r);
      }
      const std::string why = "timed out after " + std::to_string(timeout_ms_) + " ms in " + op + " waiting for ranks " + missing;
      record_abort(region_->map.header(), rank_, why);  // the others stop too
      throw comm_aborted(why);
    }
    if (spins % 1024 == 0 && creator_gone(h)) {
      const std::string why = "the process that created the region (pid " + std::to_string(h.creator_pid) + ", the launcher) is gone";
      record_abort(region_->map.header(), -1, why);  // the others stop too
      throw comm_aborted("aborted: " + why);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void host_communicator::to_slot(float* dst, const float* src, std::uint64_t n) {
#ifdef GPUMEM_WITH_CUDA
  if (device_ >= 0) {
    auto stream = static_cast<cudaStream_t>(stream_);
    detail::check_cuda(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDefault, stream), "cudaMemcpyAsync");
    detail::check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    return;
  }
#endif
  std::memcpy(dst, src, n * sizeof(float));
}

void host_communicator::from_slot(float* dst, const float* src, std::uint64_t n) {
#ifdef GPUMEM_WITH_CUDA
  if (device_ >= 0) {
    detail::check_cuda(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDefault, static_cast<cudaStream_t>(stream_)),
                       "cudaMemcpyAsync");
    return;
  }
#endif
  std::memcpy(dst, src, n * sizeof(float));
}

void host_communicator::finish_copies() {
#ifdef GPUMEM_WITH_CUDA
  if (device_ >= 0) detail::check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize");
#endif
}

template <class Chunk>
void host_communicator::in_chunks(const char* op, stream_handle stream, std::uint64_t count, Chunk&& chunk) {
  begin(op, stream);
#ifdef GPUMEM_WITH_CUDA
  std::optional<detail::device_scope> scope;
  if (device_ >= 0) scope.emplace(device_);
#endif
  const std::uint64_t per_slot = slot_bytes_ / sizeof(float);
  for (std::uint64_t offset = 0; offset < count; offset += per_slot) chunk(offset, std::min(per_slot, count - offset));
}

void host_communicator::all_reduce(float* buffer, std::uint64_t count, stream_handle stream) {
  check_pointer(buffer, "buffer");
  if (count == 0) count_error(count, "positive integer");
  std::vector<float> staging(device_ >= 0 ? std::min(slot_bytes_ / sizeof(float), count) : 0);
  in_chunks("allReduce", stream, count, [&](std::uint64_t offset, std::uint64_t n) {
    to_slot(slot(rank_), buffer + offset, n);
    barrier("allReduce");
    // The sum in rank order, the same on every rank. The rank's own values are in its slot, so a
    // host buffer is written in place.
    float* out = device_ >= 0 ? staging.data() : buffer + offset;
    std::memcpy(out, slot(0), n * sizeof(float));
    for (int r = 1; r < size_; ++r) {
      const float* in = slot(r);
      for (std::uint64_t i = 0; i < n; ++i) out[i] += in[i];
    }
    if (device_ >= 0) {
      from_slot(buffer + offset, out, n);
      finish_copies();
    }
    barrier("allReduce");  // nobody writes its slot again before everyone has read this chunk
  });
}

void host_communicator::all_gather(const float* send, float* recv, std::uint64_t count, stream_handle stream) {
  check_pointer(send, "send");
  check_pointer(recv, "recv");
  if (count == 0) count_error(count, "positive integer");
  if (count > std::numeric_limits<std::uint64_t>::max() / sizeof(float) / static_cast<std::uint64_t>(size_)) {
    count_error(count, "count * size * 4 below 2^64");
  }
  in_chunks("allGather", stream, count, [&](std::uint64_t offset, std::uint64_t n) {
    to_slot(slot(rank_), send + offset, n);
    barrier("allGather");
    for (int r = 0; r < size_; ++r) from_slot(recv + static_cast<std::uint64_t>(r) * count + offset, slot(r), n);
    finish_copies();
    barrier("allGather");
  });
}

void host_communicator::broadcast(float* buffer, std::uint64_t count, int root, stream_handle stream) {
  check_pointer(buffer, "buffer");
  if (count == 0) count_error(count, "positive integer");
  if (root < 0 || root >= size_) {
    throw invalid_argument(invalid_argument::kind::range, "root",
                           "Expected an integer in [0, " + std::to_string(size_ - 1) + "] for root but received " + std::to_string(root));
  }
  in_chunks("broadcast", stream, count, [&](std::uint64_t offset, std::uint64_t n) {
    if (rank_ == root) to_slot(slot(root), buffer + offset, n);
    barrier("broadcast");
    if (rank_ != root) {
      from_slot(buffer + offset, slot(root), n);
      finish_copies();
    }
    barrier("broadcast");
  });
}

}  // namespace gpumem::comm
