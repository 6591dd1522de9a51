// The errors of the communicators (src/comm): a stopped group, and a failed NCCL call. The binding
// turns comm_aborted into a JavaScript error with code GPUMEM_COMM_ABORTED and nccl_error into one
// with code GPUMEM_NCCL; bad arguments are gpumem::invalid_argument, use after destroy
// gpumem::invalid_state.
#pragma once
#include <string>

#include "gpumem/errors.hpp"

namespace gpumem::comm {

// The group was stopped: a rank (or the parent) aborted it, a wait ran past the timeout, or NCCL
// reported a failure of the group. what() says why ("aborted: rank 1 failed: ...").
class comm_aborted : public error {
 public:
  using error::error;
};

// An NCCL call returned an error. result is the ncclResult_t, name its enumerator's name.
class nccl_error : public error {
 public:
  nccl_error(const std::string& what, int result, std::string name) : error(what), result_(result), name_(std::move(name)) {}
  int result() const noexcept { return result_; }
  const std::string& name() const noexcept { return name_; }

 private:
  int result_;
  std::string name_;
};

}  // namespace gpumem::comm
