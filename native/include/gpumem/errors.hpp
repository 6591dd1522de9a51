// Typed errors. Out-of-memory is told apart from bad arguments and from other CUDA failures so the
// binding can turn each into its own JavaScript error. Deallocation paths and destructors that
// release memory never throw for driver failures (they are counted and logged instead); they throw
// invalid_argument only for a pointer or size the caller got wrong, before touching any state.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include "gpumem/stats.hpp"

namespace gpumem {

class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "(reserved 4.00 GiB, allocated 3.10 GiB: 0.90 GiB reserved but unallocated, largest free block
// 256.00 MiB)": the figures every out-of-memory message ends with, so that fragmentation (much
// reserved but unallocated, no free block large enough) is told apart from plain exhaustion. A
// resource with no cache (largest_free_block -1) has no free block: 0 B.
std::string describe_memory(const resource_stats& stats);

// The request could not be met; the resource is still usable. what() is the reason followed by
// describe_memory(stats).
class out_of_memory : public error {
 public:
  out_of_memory(const std::string& reason, std::uint64_t requested_bytes, const resource_stats& stats)
      : error(reason + " " + describe_memory(stats)), reason_(reason), requested_bytes_(requested_bytes), stats_(stats) {}
  // The message without the figures (a layer that rethrows adds its own).
  const std::string& reason() const noexcept { return reason_; }
  std::uint64_t requested_bytes() const noexcept { return requested_bytes_; }
  const resource_stats& stats() const noexcept { return stats_; }

 private:
  std::string reason_;
  std::uint64_t requested_bytes_;
  resource_stats stats_;
};

// A bad argument: which one, and whether it is a type/identity error (pointer never handed out,
// double free) or a range error (size 0, wrong size).
class invalid_argument : public error {
 public:
  enum class kind { range, type };
  invalid_argument(kind k, std::string argument, const std::string& what)
      : error(what), kind_(k), argument_(std::move(argument)) {}
  kind error_kind() const noexcept { return kind_; }
  const std::string& argument() const noexcept { return argument_; }

 private:
  kind kind_;
  std::string argument_;
};

// Called on a resource after dispose(), or a feature the build lacks.
class invalid_state : public error {
 public:
  using error::error;
};

// The running CUDA driver lacks an entry point or a feature that a strategy needs: the strategy,
// what it needs, the CUDA version whose driver first has it and the driver's own version
// (cuDriverGetVersion). An invalid_state: the strategy cannot be used on this machine, others can.
class driver_unsupported : public invalid_state {
 public:
  driver_unsupported(std::string strategy, std::string need, int required_version, int driver_version);
  const std::string& strategy() const noexcept { return strategy_; }
  const std::string& need() const noexcept { return need_; }
  int required_version() const noexcept { return required_version_; }
  int driver_version() const noexcept { return driver_version_; }

 private:
  std::string strategy_;
  std::string need_;
  int required_version_;
  int driver_version_;
};

// A CUDA call failed. code is the CUresult value (the cudaError_t value in the addon's kernels and
// copies, which call the runtime), name its name (CUDA_ERROR_OUT_OF_MEMORY, cudaErrorInvalidValue).
class cuda_error : public error {
 public:
  cuda_error(const std::string& what, int code, std::string name)
      : error(what), code_(code), name_(std::move(name)) {}
  int code() const noexcept { return code_; }
  const std::string& name() const noexcept { return name_; }

 private:
  int code_;
  std::string name_;
};

// Helpers that build the messages in one style.
[[noreturn]] void throw_unknown_pointer(const void* ptr);
[[noreturn]] void throw_size_mismatch(const void* ptr, std::uint64_t given, std::uint64_t expected);
[[noreturn]] void throw_zero_size();
std::string format_bytes(std::uint64_t bytes);        // "2.00 MiB (2097152 bytes)"
std::string format_bytes_brief(std::uint64_t bytes);  // "2.00 MiB", "512 B"
std::string format_pointer(const void* ptr);

}  // namespace gpumem
