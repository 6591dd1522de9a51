// libgpumem_torch's warnings (deprecated spellings read, a trace that could not start): given to the
// handler set by gpumem_set_warning_handler (the gpumem_torch package's, which re-emits them through
// Python's warnings module so that they can be filtered), else written to stderr.
#pragma once
#include <string>

namespace gpumem::torch {

// Says each line of `message` as one warning of `category` (GPUMEM_TORCH_WARN_*). Call it with no
// lock of the library held: the handler may take the Python interpreter's lock.
void warn(int category, const std::string& message) noexcept;

// While one lives, this thread's warnings go to stderr whatever handler is set: for the entry
// points PyTorch calls under its own allocator lock (a MemPool's segments, the frees), where a
// handler that waits for the Python interpreter's lock could wait for ever.
class stderr_warnings_scope {
 public:
  stderr_warnings_scope() noexcept;
  ~stderr_warnings_scope();
  stderr_warnings_scope(const stderr_warnings_scope&) = delete;
  stderr_warnings_scope& operator=(const stderr_warnings_scope&) = delete;
};

}  // namespace gpumem::torch
