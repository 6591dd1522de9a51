// Where libgpumem_torch's warnings go (warnings.hpp, gpumem_set_warning_handler).
#include "warnings.hpp"

#include <atomic>
#include <cstdio>

#include "gpumem_torch.h"

namespace gpumem::torch {
namespace {

std::atomic<gpumem_warning_handler> handler{nullptr};
thread_local int stderr_only = 0;

}  // namespace

void warn(int category, const std::string& message) noexcept {
  const gpumem_warning_handler h = stderr_only > 0 ? nullptr : handler.load(std::memory_order_acquire);
  try {
    std::size_t start = 0;
    while (start < message.size()) {
      std::size_t end = message.find('\n', start);
      if (end == std::string::npos) end = message.size();
      const std::string line = message.substr(start, end - start);
      start = end + 1;
      if (line.empty()) continue;
      if (h != nullptr) h(category, line.c_str());
      else std::fprintf(stderr, "%s\n", line.c_str());
    }
  } catch (...) {
    std::fprintf(stderr, "%s\n", message.c_str());
  }
}

stderr_warnings_scope::stderr_warnings_scope() noexcept { ++stderr_only; }
stderr_warnings_scope::~stderr_warnings_scope() { --stderr_only; }

}  // namespace gpumem::torch

extern "C" GPUMEM_TORCH_API gpumem_warning_handler gpumem_set_warning_handler(gpumem_warning_handler h) {
  return gpumem::torch::handler.exchange(h, std::memory_order_acq_rel);
}
