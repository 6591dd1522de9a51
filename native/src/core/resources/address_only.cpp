#include "gpumem/address_only.hpp"

#include <limits>
#include <mutex>
#include <string>

#include "gpumem/detail/allocation_table.hpp"
#include "gpumem/errors.hpp"

namespace gpumem {
namespace {

constexpr std::uintptr_t address_base = std::uintptr_t{1} << 44;
constexpr std::size_t address_alignment = std::size_t{2} << 20;

// Addresses that are never reused or backed: each request takes the next aligned range.
class address_counter {
 public:
  void* take(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t rounded = (bytes + address_alignment - 1) / address_alignment * address_alignment;
    if (rounded < bytes || next_ > std::numeric_limits<std::uintptr_t>::max() - rounded) {
      throw out_of_memory("address-only memory: no address range of " + format_bytes(bytes) + " left", bytes, {});
    }
    void* p = reinterpret_cast<void*>(next_);
    next_ += rounded;
    return p;
  }

 private:
  std::mutex mutex_;
  std::uintptr_t next_ = address_base;
};

// cudaMalloc's (or malloc's) bookkeeping without the memory.
class address_only_resource final : public detail::leaf_resource {
 private:
  void* do_allocate(std::size_t bytes, stream_handle) override {
    void* p = addresses_.take(bytes);
    table_.add(p, bytes, bytes);
    return p;
  }
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle) override { table_.remove(ptr, bytes); }
  memory_kind do_kind() const noexcept override { return memory_kind::host; }
  int do_device() const noexcept override { return -1; }
  address_counter addresses_;
};

// Ranges, allocations and mappings of nothing: each allocation a number never given out again.
class address_only_vmm final : public vmm {
 public:
  address_only_vmm(std::size_t granule, std::uint64_t total) : granule_(granule), total_(total) {}
  std::size_t granule_bytes() const noexcept override { return granule_; }
  void* reserve(std::size_t bytes) override { return addresses_.take(bytes); }
  void free_range(void*, std::size_t) noexcept override {}
  handle create(std::size_t, placement) override { return ++created_; }
  void release(handle) noexcept override {}
  void map(void*, std::size_t, handle, placement) override {}
  void unmap(void*, std::size_t) noexcept override {}
  void copy(void*, const void*, std::size_t, stream_handle) override {}
  void synchronize(stream_handle) override {}
  std::uint64_t total_bytes() const noexcept override { return total_; }
  std::uint64_t default_device_budget() const override { return total_; }
  memory_kind kind() const noexcept override { return memory_kind::host; }
  int device() const noexcept override { return -1; }

 private:
  std::size_t granule_;
  std::uint64_t total_;
  handle created_ = 0;
  address_counter addresses_;
};

}  // namespace

std::unique_ptr<memory_resource> make_address_only_resource() { return std::make_unique<address_only_resource>(); }

std::unique_ptr<vmm> make_address_only_vmm(std::size_t granule_bytes, std::uint64_t total_bytes) {
  if (granule_bytes < 4096 || (granule_bytes & (granule_bytes - 1)) != 0) {
    throw invalid_argument(invalid_argument::kind::range, "granuleBytes",
                           "Expected granuleBytes to be a power of two of at least 4096 but received " +
                               std::to_string(granule_bytes));
  }
  return std::make_unique<address_only_vmm>(granule_bytes, total_bytes);
}

}  // namespace gpumem
