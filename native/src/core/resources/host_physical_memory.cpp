// The host twin of CUDA's virtual memory management: address space reserved with
// mmap(PROT_NONE), each run of granules committed with one mprotect and decommitted with one
// madvise + mprotect, so
// that expandable_resource runs, and is tested, on machines without a GPU.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "gpumem/errors.hpp"
#include "gpumem/physical_memory.hpp"
#include "gpumem/stream_ordering.hpp"

namespace gpumem {
namespace {

constexpr std::size_t default_host_granule = std::size_t{2} << 20;

class host_physical_memory final : public physical_memory {
 public:
  explicit host_physical_memory(std::size_t granule) : granule_(granule) {}

  std::size_t granule_bytes() const noexcept override { return granule_; }

  void* reserve_range(std::size_t bytes) override {
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

  void release_range(void* base, std::size_t bytes) noexcept override {
    synchronize_host_streams();  // work queued on a host stream must not write into a hole
    munmap(base, bytes);
  }

  void map_run(void* addr, std::size_t bytes) override {
    if (mprotect(addr, bytes, PROT_READ | PROT_WRITE) != 0) {
      const int error = errno;
      mprotect(addr, bytes, PROT_NONE);  // a partial commit is undone: a failed run maps nothing
      throw out_of_memory("mprotect: could not commit a run of " + format_bytes(bytes) + ": " + std::strerror(error),
                          bytes, {});
    }
  }

  void unmap_run(void* addr, std::size_t bytes) noexcept override {
    synchronize_host_streams();  // work queued on a host stream must not fault on PROT_NONE
    madvise(addr, bytes, MADV_DONTNEED);  // the pages go back to the system now
    mprotect(addr, bytes, PROT_NONE);     // and a stray access faults, as on an unmapped GPU range
  }

  void synchronize() noexcept override { synchronize_host_streams(); }

  std::uint64_t total_bytes() const noexcept override { return 0; }
  memory_kind kind() const noexcept override { return memory_kind::host; }
  int device() const noexcept override { return -1; }

 private:
  std::size_t granule_;
};

}  // namespace

std::unique_ptr<physical_memory> make_host_physical_memory(std::size_t granule_bytes) {
  const std::size_t granule = granule_bytes == 0 ? default_host_granule : granule_bytes;
  const long page = sysconf(_SC_PAGESIZE);
  const std::size_t page_bytes = page > 0 ? static_cast<std::size_t>(page) : 4096;
  if (granule < page_bytes || (granule & (granule - 1)) != 0) {
    throw invalid_argument(invalid_argument::kind::range, "granuleBytes",
                           "Expected granuleBytes to be a power of two of at least the page size (" +
                               std::to_string(page_bytes) + ") but received " + std::to_string(granule_bytes));
  }
  return std::make_unique<host_physical_memory>(granule);
}

}  // namespace gpumem
