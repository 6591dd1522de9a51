// The host twin of tiered's CUDA VMM tiers (tier_memory.hpp): both tiers are host memory, but a
// physical allocation is a memfd that is mapped at a fixed address inside a reservation, so that
// moving a block between tiers (create on the other tier, map at a temporary address, copy, unmap
// the old, map the new at the block's address) is the same sequence of steps as on a GPU, and
// tiered_resource is tested on machines without one. One file descriptor per physical allocation:
// a process's open-file limit (ulimit -n) bounds how many blocks the twin can hold, and running out
// of descriptors is an out_of_memory like any other.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "gpumem/errors.hpp"
#include "gpumem/physical_memory.hpp"
#include "gpumem/stream_ordering.hpp"
#include "gpumem/tier_memory.hpp"

namespace gpumem {

const char* tier_name(memory_tier tier) noexcept { return tier == memory_tier::device ? "device" : "host"; }

namespace {

class host_tier_memory final : public tier_memory {
 public:
  // The address ranges are the expandable twin's reservations (mmap PROT_NONE, granule-aligned).
  explicit host_tier_memory(std::size_t granule) : ranges_(make_host_physical_memory(granule)) {}

  std::size_t granule_bytes() const noexcept override { return ranges_->granule_bytes(); }

  void* reserve(std::size_t bytes) override { return ranges_->reserve_range(bytes); }

  void free_range(void* base, std::size_t bytes) noexcept override { ranges_->release_range(base, bytes); }

  handle create(std::size_t bytes, memory_tier tier) override {
    const int fd = memfd_create(tier == memory_tier::device ? "gpumem-tiered-device" : "gpumem-tiered-host", MFD_CLOEXEC);
    if (fd < 0) {
      throw out_of_memory(std::string("tiered (host twin): memfd_create failed: ") + std::strerror(errno), bytes, {});
    }
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      const int error = errno;
      close(fd);
      throw out_of_memory("tiered (host twin): ftruncate to " + format_bytes(bytes) + " failed: " + std::strerror(error),
                          bytes, {});
    }
    return static_cast<handle>(fd);
  }

  void release(handle h) noexcept override { close(static_cast<int>(h)); }

  void map(void* addr, std::size_t bytes, handle h, memory_tier) override {
    void* p = mmap(addr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, static_cast<int>(h), 0);
    if (p == MAP_FAILED) {
      const int error = errno;
      unmap(addr, bytes);  // whatever MAP_FIXED did to the range, it is a reservation again
      throw out_of_memory("tiered (host twin): mapping " + format_bytes(bytes) + " failed: " + std::strerror(error),
                          bytes, {});
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

  std::uint64_t default_device_budget() const override { return std::uint64_t{1} << 30; }
  memory_kind kind() const noexcept override { return memory_kind::host; }
  int device() const noexcept override { return -1; }

 private:
  std::unique_ptr<physical_memory> ranges_;
};

}  // namespace

std::unique_ptr<tier_memory> make_host_tier_memory(std::size_t granule_bytes) {
  return std::make_unique<host_tier_memory>(granule_bytes);
}

}  // namespace gpumem
