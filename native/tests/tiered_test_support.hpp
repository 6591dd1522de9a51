// Helpers shared by the host-only tests of tiered_resource: the VMM primitive's host implementation (vmm.hpp) with a
// simulated device capacity and counted calls, tiered options with given budgets, and a resource over
// that with the fake stream_ordering of fake_ordering.hpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "fake_ordering.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/vmm.hpp"
#include "gpumem/tiered_resource.hpp"
#include "twin_granule.hpp"

namespace gpumem::test {

// The host vmm (64 KiB granules) with a simulated device capacity: creating device memory fails, as
// cuMemCreate would, once `device_capacity` bytes of device memory are held. Counts the device bytes
// held, creations, releases, refusals, copies and synchronisations.
class capped_tier_memory final : public vmm {
 public:
  explicit capped_tier_memory(std::uint64_t device_capacity)
      : inner_(make_host_vmm(granule)), capacity_(device_capacity) {}
  std::size_t granule_bytes() const noexcept override { return inner_->granule_bytes(); }
  void* reserve(std::size_t bytes) override { return inner_->reserve(bytes); }
  void free_range(void* base, std::size_t bytes) noexcept override { inner_->free_range(base, bytes); }
  handle create(std::size_t bytes, placement tier) override {
    if (tier == placement::device && device_held + bytes > capacity_) {
      ++refused;
      throw out_of_memory("capped: device full", bytes, {});
    }
    handle h = inner_->create(bytes, tier);
    if (tier == placement::device) device_held += bytes;
    created_.push_back({h, bytes, tier});
    ++creates;
    return h;
  }
  void release(handle h) noexcept override {
    for (auto it = created_.begin(); it != created_.end(); ++it) {
      if (it->h != h) continue;
      if (it->tier == placement::device) device_held -= it->bytes;
      created_.erase(it);
      break;
    }
    ++releases;
    inner_->release(h);
  }
  void map(void* addr, std::size_t bytes, handle h, placement tier) override { inner_->map(addr, bytes, h, tier); }
  void unmap(void* addr, std::size_t bytes) noexcept override { inner_->unmap(addr, bytes); }
  void copy(void* dst, const void* src, std::size_t bytes, stream_handle stream) override {
    ++copies;
    inner_->copy(dst, src, bytes, stream);
  }
  void synchronize(stream_handle stream) override {
    ++synchronizes;
    inner_->synchronize(stream);
  }
  std::uint64_t total_bytes() const noexcept override { return inner_->total_bytes(); }
  std::uint64_t default_device_budget() const override { return inner_->default_device_budget(); }
  memory_kind kind() const noexcept override { return memory_kind::host; }
  int device() const noexcept override { return -1; }

  std::uint64_t device_held = 0;
  std::size_t creates = 0, releases = 0, refused = 0, copies = 0, synchronizes = 0;

 private:
  struct created {
    handle h;
    std::size_t bytes;
    placement tier;
  };
  std::unique_ptr<vmm> inner_;
  std::uint64_t capacity_;
  std::vector<created> created_;
};

// Options with the given device and host budgets. The backup limit of sleep is fixed rather than
// the host's free memory, so that the tests behave the same on every machine.
inline tiered_options budgets(std::uint64_t device, std::uint64_t host) {
  tiered_options o;
  o.device_budget_bytes = device;
  o.host_budget_bytes = host;
  o.backup_limit_bytes = std::uint64_t{1} << 30;
  return o;
}

// A tiered_resource over a capped_tier_memory whose stream ordering is a fake_ordering writing to
// `log`. Members are declared in construction order: the log outlives the resource.
struct tiered_fixture {
  explicit tiered_fixture(tiered_options options, std::uint64_t device_capacity = UINT64_MAX)
      : memory(new capped_tier_memory(device_capacity)),
        resource(std::unique_ptr<vmm>(memory), options, make_fake_ordering(log)) {}
  std::shared_ptr<fake_ordering_log> log = std::make_shared<fake_ordering_log>();
  capped_tier_memory* memory;  // owned by the resource
  tiered_resource resource;
};

}  // namespace gpumem::test
