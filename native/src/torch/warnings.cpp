// Where libgpumem_torch's warnings go (warnings.hpp, gpumem_set_warning_handler).
#include "warnings.hpp"

#include <atomic>
#include <cstdio>

#include "gpumem_torch.h"
#include "text_lines.hpp"

namespace gpumem::torch {
namespace {

std::atomic<gpumem_warning_handler> handler{nullptr};
thread_local int stderr_only = 0;

}  // namespace

void warn(int category, const std::string& message) noexcept {
  const gpumem_warning_handler h = stderr_only > 0 ? nullptr : handler.load(std::memory_order_acquire);
  try {
    for (const std::string& line : non_empty_lines(message)) {
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
