#include "replay_twins.hpp"

#include <limits>
#include <mutex>

#include "gpumem/detail/allocation_table.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/expandable_resource.hpp"
#include "gpumem/limiting_adaptor.hpp"
#include "gpumem/physical_memory.hpp"
#include "gpumem/pool_resource.hpp"

namespace gpumem::torch {

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
      throw out_of_memory("replay twin: no address range of " + format_bytes(bytes), bytes, {});
    }
    void* p = reinterpret_cast<void*>(next_);
    next_ += rounded;
    return p;
  }

 private:
  std::mutex mutex_;
  std::uintptr_t next_ = address_base;
};

// pool's upstream: cudaMalloc's bookkeeping without the memory.
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

// expandable's physical memory: ranges and runs that map nothing.
class address_only_physical_memory final : public physical_memory {
 public:
  address_only_physical_memory(std::size_t granule, std::uint64_t total) : granule_(granule), total_(total) {}
  std::size_t granule_bytes() const noexcept override { return granule_; }
  void* reserve_range(std::size_t bytes) override { return addresses_.take(bytes); }
  void release_range(void*, std::size_t) noexcept override {}
  void map_run(void*, std::size_t) override {}
  void unmap_run(void*, std::size_t) noexcept override {}
  std::uint64_t total_bytes() const noexcept override { return total_; }
  memory_kind kind() const noexcept override { return memory_kind::host; }
  int device() const noexcept override { return -1; }

 private:
  std::size_t granule_;
  std::uint64_t total_;
  address_counter addresses_;
};

// A CUDA device's granule for virtual memory management (cuMemGetAllocationGranularity's
// recommendation on current GPUs).
constexpr std::size_t device_granule = std::size_t{2} << 20;

}  // namespace

replay_twin::~replay_twin() {
  while (!layers.empty()) layers.pop_back();
}

const std::vector<std::string>& replayed_strategies() {
  static const std::vector<std::string> names{"pool", "expandable"};
  return names;
}

replay_twin make_replay_twin(const std::string& name, std::uint64_t capacity_bytes, const chain_spec* configured) {
  const bool own = configured != nullptr && configured->strategy == name;
  replay_twin t;
  if (name == "pool") {
    t.layers.push_back(std::make_unique<address_only_resource>());
    t.layers.push_back(std::make_unique<limiting_adaptor>(*t.layers.back(), static_cast<std::size_t>(capacity_bytes)));
    const pool_options options = own ? configured->options<pool_spec>().options : pool_options{};
    t.layers.push_back(std::make_unique<pool_resource>(*t.layers.back(), options));
    return t;
  }
  if (name == "expandable") {
    expandable_options options;
    std::size_t granule = device_granule;
    if (own) {
      const expandable_spec& s = configured->options<expandable_spec>();
      options = s.options;
      if (s.granule_bytes != 0) granule = static_cast<std::size_t>(s.granule_bytes);
    }
    options.backup_limit_bytes = 0;  // never sleeps here
    options.capacity_bytes = capacity_bytes;
    if (options.reserve_bytes == 0 || options.reserve_bytes > capacity_bytes) options.reserve_bytes = 0;
    auto memory = make_limited_physical_memory(std::make_unique<address_only_physical_memory>(granule, capacity_bytes),
                                               capacity_bytes);
    t.layers.push_back(std::make_unique<expandable_resource>(std::move(memory), options));
    return t;
  }
  throw invalid_argument(invalid_argument::kind::range, "strategy",
                         "Expected one of pool, expandable for the out-of-memory replay but received '" + name + "'");
}

}  // namespace gpumem::torch
