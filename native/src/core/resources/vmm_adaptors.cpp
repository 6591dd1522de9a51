// The common layers (limitBytes, faultInjection) for a strategy that maps memory: each wraps a vmm
// and may fail create (a whole physical allocation) with out_of_memory before the inner one is
// asked, as a smaller GPU (or a failing driver) would. They count the bytes of the physical
// allocations created through them and not released yet, whatever tier and however often mapped.
// The rules are budget_rules.hpp's, shared with the resource adaptors. Not thread-safe by
// themselves: the owning resource calls them under its lock.
#include <string>
#include <unordered_map>

#include "budget_rules.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/vmm.hpp"

namespace gpumem {
namespace {

// Forwards everything to the inner vmm, counting the bytes created through it and not released.
// A subclass says why a create would fail (empty: it passes).
class counting_vmm : public vmm {
 public:
  explicit counting_vmm(std::unique_ptr<vmm> inner) : inner_(std::move(inner)) {}
  std::size_t granule_bytes() const noexcept override { return inner_->granule_bytes(); }
  void* reserve(std::size_t bytes) override { return inner_->reserve(bytes); }
  void free_range(void* base, std::size_t bytes) noexcept override { inner_->free_range(base, bytes); }

  handle create(std::size_t bytes, placement tier) override {
    const std::string why = refuse(bytes);
    if (!why.empty()) throw out_of_memory(why, bytes, {});
    sizes_.reserve(sizes_.size() + 1);  // before the inner create: afterwards nothing may throw
    const handle h = inner_->create(bytes, tier);
    sizes_.emplace(h, bytes);
    held_ += bytes;
    return h;
  }

  void release(handle h) noexcept override {
    inner_->release(h);
    auto it = sizes_.find(h);
    if (it == sizes_.end()) return;
    held_ -= it->second;
    sizes_.erase(it);
  }

  void map(void* addr, std::size_t bytes, handle h, placement tier) override { inner_->map(addr, bytes, h, tier); }
  void unmap(void* addr, std::size_t bytes) noexcept override { inner_->unmap(addr, bytes); }
  void copy(void* dst, const void* src, std::size_t bytes, stream_handle stream) override {
    inner_->copy(dst, src, bytes, stream);
  }
  void synchronize(stream_handle stream) override { inner_->synchronize(stream); }
  void synchronize_device() noexcept override { inner_->synchronize_device(); }
  std::uint64_t total_bytes() const noexcept override { return inner_->total_bytes(); }
  std::uint64_t default_device_budget() const override { return inner_->default_device_budget(); }
  memory_kind kind() const noexcept override { return inner_->kind(); }
  int device() const noexcept override { return inner_->device(); }

 protected:
  // Why a create of `bytes` fails, the whole message; empty: it goes to the inner vmm.
  virtual std::string refuse(std::size_t bytes) = 0;
  std::uint64_t held() const noexcept { return held_; }

 private:
  std::unique_ptr<vmm> inner_;
  std::unordered_map<handle, std::size_t> sizes_;  // the allocations created through this layer
  std::uint64_t held_ = 0;
};

class limited_vmm final : public counting_vmm {
 public:
  limited_vmm(std::unique_ptr<vmm> inner, std::uint64_t limit) : counting_vmm(std::move(inner)), limit_(limit) {}

 private:
  std::string refuse(std::size_t bytes) override {
    const std::string why = detail::over_limit(bytes, held(), limit_);
    return why.empty() ? why : "limit: " + why;
  }
  std::uint64_t limit_;
};

class fault_injecting_vmm final : public counting_vmm {
 public:
  fault_injecting_vmm(std::unique_ptr<vmm> inner, fault_options options)
      : counting_vmm(std::move(inner)), options_(options) {}

 private:
  std::string refuse(std::size_t bytes) override {
    const std::string why = detail::injected_fault(options_, ++attempts_, bytes, held(), "physical allocation");
    return why.empty() ? why : "fault injection: injected out-of-memory: " + why;
  }
  fault_options options_;
  std::uint64_t attempts_ = 0;
};

}  // namespace

std::unique_ptr<vmm> make_limited_vmm(std::unique_ptr<vmm> inner, std::uint64_t limit_bytes) {
  return std::make_unique<limited_vmm>(std::move(inner), limit_bytes);
}

std::unique_ptr<vmm> make_fault_injecting_vmm(std::unique_ptr<vmm> inner, fault_options options) {
  return std::make_unique<fault_injecting_vmm>(std::move(inner), options);
}

}  // namespace gpumem
