// The host implementation of the VMM primitive (gpumem/vmm.hpp): both tiers are host memory, but a physical
// allocation is a memfd that is mapped at a fixed address inside a reservation, so that moving a
// block between tiers (create on the other tier, map at a temporary address, copy, unmap the old,
// map the new at the block's address), a run mapped and unmapped as a range grows and shrinks, and a
// sleep and wake are the same sequences of steps as on a GPU, and the strategies are tested on
// machines without one. One file descriptor per physical allocation: a process's open-file limit
// (ulimit -n) bounds how many it can hold; where the soft limit is what stops it, it is raised
// to the hard limit once (as Node does at start), and past that running out of descriptors is an
// out_of_memory like any other.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "gpumem/errors.hpp"
#include "gpumem/stream_ordering.hpp"
#include "gpumem/vmm.hpp"

namespace gpumem {


namespace {

constexpr std::size_t default_host_granule = std::size_t{2} << 20;

// Raises the soft limit on open files to the hard limit; false where it is there already or cannot be.
bool raise_open_file_limit() noexcept {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return false;
  limit.rlim_cur = limit.rlim_max;
  return setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

int new_memfd(placement tier) noexcept {
  return memfd_create(tier == placement::device ? "gpumem-vmm-device" : "gpumem-vmm-host", MFD_CLOEXEC);
}

class host_vmm final : public vmm {
 public:
  explicit host_vmm(std::size_t granule) : granule_(granule) {}

  std::size_t granule_bytes() const noexcept override { return granule_; }

  void* reserve(std::size_t bytes) override {
    // mmap aligns to pages only: reserve a granule more and cut the unaligned ends off.
    if (bytes > SIZE_MAX - granule_) throw out_of_memory("mmap: no address range of " + format_bytes(bytes), bytes, {});
    const std::size_t padded = bytes + granule_;
    void* raw = mmap(nullptr, padded, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) {
      throw out_of_memory("mmap: could not reserve an address range of " + format_bytes(bytes) + ": " +
                              std::strerror(errno),
                          bytes, {});
    }
    const auto start = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t aligned = (start + granule_ - 1) & ~(std::uintptr_t{granule_} - 1);
    if (aligned > start) munmap(raw, aligned - start);
    const std::uintptr_t tail = aligned + bytes;
    const std::uintptr_t end = start + padded;
    if (end > tail) munmap(reinterpret_cast<void*>(tail), end - tail);
    return reinterpret_cast<void*>(aligned);
  }

  void free_range(void* base, std::size_t bytes) noexcept override {
    synchronize_host_streams();  // work queued on a host stream must not write into a hole
    munmap(base, bytes);
  }

  handle create(std::size_t bytes, placement tier) override {
    int fd = new_memfd(tier);
    if (fd < 0 && errno == EMFILE && raise_open_file_limit()) fd = new_memfd(tier);
    if (fd < 0) {
      throw out_of_memory(std::string("host memory: memfd_create failed: ") + std::strerror(errno), bytes, {});
    }
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      const int error = errno;
      close(fd);
      throw out_of_memory("host memory: ftruncate to " + format_bytes(bytes) + " failed: " + std::strerror(error), bytes,
                          {});
    }
    return static_cast<handle>(fd);
  }

  void release(handle h) noexcept override { close(static_cast<int>(h)); }

  void map(void* addr, std::size_t bytes, handle h, placement) override {
    void* p = mmap(addr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, static_cast<int>(h), 0);
    if (p == MAP_FAILED) {
      const int error = errno;
      unmap(addr, bytes);  // whatever MAP_FIXED did to the range, it is a reservation again
      throw out_of_memory("host memory: mapping " + format_bytes(bytes) + " failed: " + std::strerror(error), bytes, {});
    }
  }

  void unmap(void* addr, std::size_t bytes) noexcept override {
    synchronize_host_streams();  // work queued on a host stream must not fault on PROT_NONE
    // Back to an inaccessible reservation (munmap would leave a hole another mmap could take).
    mmap(addr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  }

  void copy(void* dst, const void* src, std::size_t bytes, stream_handle stream) override {
    synchronize_host_stream(stream);  // in stream order, after the work queued before it
    std::memcpy(dst, src, bytes);
  }
  void synchronize(stream_handle stream) override { synchronize_host_stream(stream); }
  void synchronize_device() noexcept override { synchronize_host_streams(); }

  std::uint64_t total_bytes() const noexcept override { return 0; }
  std::uint64_t default_device_budget() const override { return std::uint64_t{1} << 30; }
  memory_kind kind() const noexcept override { return memory_kind::host; }
  int device() const noexcept override { return -1; }

 private:
  std::size_t granule_;
};

}  // namespace

std::unique_ptr<vmm> make_host_vmm(std::size_t granule_bytes) {
  const std::size_t granule = granule_bytes == 0 ? default_host_granule : granule_bytes;
  const long page = sysconf(_SC_PAGESIZE);
  const std::size_t page_bytes = page > 0 ? static_cast<std::size_t>(page) : 4096;
  if (granule < page_bytes || (granule & (granule - 1)) != 0) {
    throw invalid_argument(invalid_argument::kind::range, "granuleBytes",
                           "Expected granuleBytes to be a power of two of at least the page size (" +
                               std::to_string(page_bytes) + ") but received " + std::to_string(granule_bytes));
  }
  return std::make_unique<host_vmm>(granule);
}

}  // namespace gpumem
