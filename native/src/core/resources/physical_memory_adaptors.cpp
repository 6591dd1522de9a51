// The common layers (limitBytes, faultInjection) for a run mapper: each wraps a physical_memory
// and may fail map_run (the whole run) with out_of_memory before the inner one is asked, as a smaller GPU (or a
// failing driver) would. Not thread-safe by themselves: the owning resource calls them under its lock.
#include <string>

#include "gpumem/errors.hpp"
#include "gpumem/physical_memory.hpp"

namespace gpumem {
namespace {

// Forwards everything to the inner physical memory.
class physical_memory_decorator : public physical_memory {
 public:
  explicit physical_memory_decorator(std::unique_ptr<physical_memory> inner) : inner_(std::move(inner)) {}
  std::size_t granule_bytes() const noexcept override { return inner_->granule_bytes(); }
  void* reserve_range(std::size_t bytes) override { return inner_->reserve_range(bytes); }
  void release_range(void* base, std::size_t bytes) noexcept override { inner_->release_range(base, bytes); }
  void map_run(void* addr, std::size_t bytes) override { inner_->map_run(addr, bytes); }
  void unmap_run(void* addr, std::size_t bytes) noexcept override { inner_->unmap_run(addr, bytes); }
  void synchronize() noexcept override { inner_->synchronize(); }
  std::uint64_t total_bytes() const noexcept override { return inner_->total_bytes(); }
  memory_kind kind() const noexcept override { return inner_->kind(); }
  int device() const noexcept override { return inner_->device(); }

 protected:
  physical_memory& inner() noexcept { return *inner_; }

 private:
  std::unique_ptr<physical_memory> inner_;
};

class limited_physical_memory final : public physical_memory_decorator {
 public:
  limited_physical_memory(std::unique_ptr<physical_memory> inner, std::uint64_t limit)
      : physical_memory_decorator(std::move(inner)), limit_(limit) {}

  void map_run(void* addr, std::size_t bytes) override {
    if (bytes > limit_ - mapped_) {  // mapped_ never exceeds limit_
      throw out_of_memory("limit: a run of " + format_bytes(bytes) + " with " + format_bytes(mapped_) + " of the " +
                              format_bytes(limit_) + " limit mapped",
                          bytes, {});
    }
    inner().map_run(addr, bytes);
    mapped_ += bytes;
  }

  void unmap_run(void* addr, std::size_t bytes) noexcept override {
    inner().unmap_run(addr, bytes);
    mapped_ -= bytes;
  }

 private:
  std::uint64_t limit_;
  std::uint64_t mapped_ = 0;
};

class fault_injecting_physical_memory final : public physical_memory_decorator {
 public:
  fault_injecting_physical_memory(std::unique_ptr<physical_memory> inner, fault_options options)
      : physical_memory_decorator(std::move(inner)), options_(options) {}

  void map_run(void* addr, std::size_t bytes) override {
    const std::uint64_t attempt = ++attempts_;
    if (options_.fail_every != 0 && attempt % options_.fail_every == 0) {
      throw out_of_memory("fault injection: injected out-of-memory: run map #" + std::to_string(attempt) +
                              " failed (failEvery " + std::to_string(options_.fail_every) + ")",
                          bytes, {});
    }
    if (bytes > options_.fail_after_bytes || mapped_ > options_.fail_after_bytes - bytes) {
      throw out_of_memory("fault injection: injected out-of-memory: a run of " + format_bytes(bytes) + " with " +
                              format_bytes(mapped_) + " of the " + format_bytes(options_.fail_after_bytes) +
                              " budget (failAfterBytes) mapped",
                          bytes, {});
    }
    inner().map_run(addr, bytes);
    mapped_ += bytes;
  }

  void unmap_run(void* addr, std::size_t bytes) noexcept override {
    inner().unmap_run(addr, bytes);
    mapped_ -= bytes;
  }

 private:
  fault_options options_;
  std::uint64_t attempts_ = 0;
  std::uint64_t mapped_ = 0;
};

}  // namespace

std::unique_ptr<physical_memory> make_limited_physical_memory(std::unique_ptr<physical_memory> inner,
                                                              std::uint64_t limit_bytes) {
  return std::make_unique<limited_physical_memory>(std::move(inner), limit_bytes);
}

std::unique_ptr<physical_memory> make_fault_injecting_physical_memory(std::unique_ptr<physical_memory> inner,
                                                                      fault_options options) {
  return std::make_unique<fault_injecting_physical_memory>(std::move(inner), options);
}

}  // namespace gpumem
