// Mapped pinned host memory: one cudaHostAlloc(cudaHostAllocMapped | cudaHostAllocPortable) per
// allocate, one cudaFreeHost per deallocate. Kernels on any device read and write it in place: on
// 64-bit Linux with unified addressing the host pointer is the device pointer (checked on every
// allocation with cudaHostGetDevicePointer; a mismatch is an invalid_state, never a wrong pointer).
// The 'pinned' strategy is a pool_resource over this leaf; on its own it is the driver's cost.
//
// Its memory kind is memory_kind::pinned: it is copied with cudaMemcpy and, under a pool, ordered
// with CUDA events on `device` (the device whose streams use it), as device memory is.
//
// Pinned pages cannot be swapped out, so pinning more than the machine has free can get the process
// (or another one) killed. The leaf caps the bytes it holds pinned: by default at MemAvailable (read
// from /proc/meminfo when the resource is created) less 10% of MemTotal; `max_pinned_bytes` lowers
// that. A request past the cap throws out_of_memory (counted, nothing pinned, the resource usable),
// saying it would pin more than the host has available.
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "gpumem/detail/allocation_table.hpp"
#include "gpumem/memory_resource.hpp"
#include "gpumem/pool_resource.hpp"

namespace gpumem {

// The host's memory as /proc/meminfo says (kB there, bytes here).
struct host_memory_info {
  std::uint64_t total_bytes = 0;      // MemTotal
  std::uint64_t available_bytes = 0;  // MemAvailable
};

// Parses the text of /proc/meminfo; nullopt when MemTotal or MemAvailable is missing or malformed.
std::optional<host_memory_info> parse_meminfo(std::string_view text);
// Reads /proc/meminfo; nullopt where it cannot be read or parsed.
std::optional<host_memory_info> read_host_memory_info();

// The default cap on pinned bytes: MemAvailable less 10% of MemTotal (0 when that is negative).
std::uint64_t default_pinned_cap(const host_memory_info& info) noexcept;

struct pinned_host_options {
  // 0: no explicit cap (the default cap alone). Otherwise the smaller of the two applies.
  std::uint64_t max_pinned_bytes = 0;
};

// The cap a pinned_host_resource works under, and how it was decided (for messages): `host` is the
// meminfo it came from (nullopt where /proc/meminfo could not be read, when an explicit cap is then
// required). Throws invalid_state when neither a readable /proc/meminfo nor max_pinned_bytes is
// there to cap with.
struct pinned_cap {
  std::uint64_t bytes = 0;
  bool explicit_cap = false;  // max_pinned_bytes is what limits
  std::optional<host_memory_info> host;
};
pinned_cap decide_pinned_cap(const pinned_host_options& options, const std::optional<host_memory_info>& host);

class pinned_host_resource final : public detail::leaf_resource {
 public:
  // Throws invalid_state without CUDA, for a device that cannot map host memory or lacks unified
  // addressing, or when no cap can be decided (see decide_pinned_cap); cuda_error for a bad device.
  explicit pinned_host_resource(int device = 0, pinned_host_options options = {});
  ~pinned_host_resource() override;  // cudaFreeHost of everything still held

  // The most bytes this resource holds pinned at once, and a description of where it comes from.
  std::uint64_t cap_bytes() const noexcept { return cap_.bytes; }
  std::string describe_cap() const;

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) override;
  memory_kind do_kind() const noexcept override { return memory_kind::pinned; }
  int do_device() const noexcept override { return device_; }

  [[noreturn]] void throw_oom(std::size_t bytes, const std::string& reason);

  int device_;
  pinned_cap cap_;
  std::mutex pinned_mutex_;
  std::uint64_t pinned_bytes_ = 0;  // held now, plus requests in flight (reserved before cudaHostAlloc)
};

// Where a 'pinned' pool's segments come from: mapped pinned host memory (cudaHostAlloc, kernels
// use it in place), or the host twin (plain host memory: the same pool logic where there is no GPU).
enum class pinned_upstream { pinned, host };

// Strategy 'pinned' (its options in a chain_spec: spec.options<pinned_spec>()): a pool_resource over
// pinned_host_resource. The pinned leaf caps what it pins (MemAvailable at creation less 10% of
// MemTotal); options.max_reserved_bytes lowers that cap and is enforced by the leaf, so a request
// past it fails saying it would pin more than the host has available. Over the host twin,
// max_reserved_bytes is the pool's own cap, as for 'pool'.
struct pinned_spec {
  pinned_upstream upstream = pinned_upstream::pinned;
  pool_options options;
};

}  // namespace gpumem
