// The rules of the common layers limitBytes and faultInjection, written once for both places they
// sit: as resource adaptors over a strategy's top (limiting_adaptor, fault_injecting_adaptor) and as
// decorators of the VMM primitive under a strategy that maps memory (vmm_adaptors.cpp). Each returns
// why a request fails (the text after the layer's name), or an empty string when it passes. Internal
// to gpumem_core.
#pragma once
#include <cstdint>
#include <string>

#include "gpumem/errors.hpp"
#include "gpumem/fault_injecting_adaptor.hpp"

namespace gpumem::detail {

// A request of `bytes` with `used` of `limit` bytes in use (used never exceeds limit).
inline std::string over_limit(std::uint64_t bytes, std::uint64_t used, std::uint64_t limit) {
  if (bytes <= limit - used) return {};
  return format_bytes(bytes) + " requested with " + format_bytes(used) + " of the " + format_bytes(limit) +
         " limit in use";
}

// Attempt number `attempt` (counting from 1) of `bytes` with `held` bytes held through the layer
// (never more than the budget); `what` names the request ("allocation", "physical allocation").
inline std::string injected_fault(const fault_options& options, std::uint64_t attempt, std::uint64_t bytes,
                                  std::uint64_t held, const char* what) {
  if (options.fail_every != 0 && attempt % options.fail_every == 0) {
    return std::string(what) + " #" + std::to_string(attempt) + " of " + format_bytes(bytes) + " failed (fail_every " +
           std::to_string(options.fail_every) + ")";
  }
  if (bytes > options.fail_after_bytes - held) {
    return format_bytes(bytes) + " requested with " + format_bytes(held) + " of the " +
           format_bytes(options.fail_after_bytes) + " budget (fail_after_bytes) held";
  }
  return {};
}

}  // namespace gpumem::detail
