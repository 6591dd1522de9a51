// One rank of an NCCL communicator (NCCL loaded at run time, nccl_library.hpp), for f32
// collectives between processes that each drive one GPU. Collectives are enqueued on the given
// stream and may be captured into a CUDA graph. A failure of the group (an asynchronous NCCL error,
// ncclRemoteError, or abort()) throws comm_aborted; any other NCCL failure nccl_error. CUDA builds.
#pragma once
#ifdef GPUMEM_WITH_CUDA
#include <cstdint>
#include <string>

#include "gpumem/stream.hpp"
#include "nccl_library.hpp"

namespace gpumem::comm {

class nccl_communicator {
 public:
  // ncclCommInitRank on `device` (made current for the call): blocks until all `size` ranks join.
  nccl_communicator(const nccl::unique_id& id, int size, int rank, int device);
  ~nccl_communicator();
  nccl_communicator(const nccl_communicator&) = delete;
  nccl_communicator& operator=(const nccl_communicator&) = delete;

  void all_reduce(float* buffer, std::uint64_t count, stream_handle stream);
  void all_gather(const float* send, float* recv, std::uint64_t count, stream_handle stream);
  void broadcast(float* buffer, std::uint64_t count, int root, stream_handle stream);

  // ncclCommAbort: stops what is in flight and frees the communicator; later collectives throw
  // comm_aborted with `reason`.
  void abort(const std::string& reason);
  // ncclCommDestroy; later calls throw invalid_state. Idempotent.
  void destroy() noexcept;

 private:
  void begin(const char* op, std::uint64_t count);
  void finish(nccl::result_t result, const char* call);

  nccl::comm_t comm_ = nullptr;
  int size_;
  int rank_;
  int device_;
  bool destroyed_ = false;
  std::string abort_reason_;
};

}  // namespace gpumem::comm
#endif
