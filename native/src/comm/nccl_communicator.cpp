// An NCCL communicator's rank: see nccl_communicator.hpp.
#ifdef GPUMEM_WITH_CUDA
#include "nccl_communicator.hpp"

#include "comm_errors.hpp"
#include "core/cuda_runtime_check.hpp"
#include "gpumem/device.hpp"
#include "gpumem/errors.hpp"

namespace gpumem::comm {
namespace {

[[noreturn]] void range_error(const char* name, const std::string& expected, long long got) {
  throw invalid_argument(invalid_argument::kind::range, name,
                         "Expected " + expected + " for " + name + " but received " + std::to_string(got));
}

void check_pointer(const void* p, const char* name) {
  if (p == nullptr) throw invalid_argument(invalid_argument::kind::type, name, std::string("Expected a pointer for ") + name + " but received null");
}

}  // namespace

nccl_communicator::nccl_communicator(const nccl::unique_id& id, int size, int rank, int device)
    : size_(size), rank_(rank), device_(device) {
  if (size < 1) range_error("size", "a positive integer", size);
  if (rank < 0 || rank >= size) range_error("rank", "an integer in [0, " + std::to_string(size - 1) + "]", rank);
  const int devices = device_count();
  if (devices == 0) throw invalid_state("an NCCL communicator needs a CUDA device: " + device_status());
  if (device < 0 || device >= devices) range_error("device", "a CUDA device index in [0, " + std::to_string(devices - 1) + "]", device);
  const nccl::functions& f = nccl::api();
  detail::device_scope scope(device);  // NCCL binds the communicator to the current device
  const nccl::result_t r = f.comm_init_rank(&comm_, size, id, rank);
  if (r != nccl::ncclSuccess) {
    comm_ = nullptr;
    nccl::check(r, "ncclCommInitRank");
  }
}

nccl_communicator::~nccl_communicator() { destroy(); }

void nccl_communicator::destroy() noexcept {
  if (comm_ != nullptr) {
    try {
      detail::device_scope scope(device_);
      nccl::api().comm_destroy(comm_);
    } catch (...) {
      // the device could not be made current: the communicator is dropped (freed with the process)
    }
    comm_ = nullptr;
  }
  destroyed_ = true;
}

void nccl_communicator::abort(const std::string& reason) {
  if (destroyed_) throw invalid_state("this NCCL communicator has been destroyed");
  if (abort_reason_.empty()) abort_reason_ = reason.empty() ? "aborted by rank " + std::to_string(rank_) : reason;
  if (comm_ != nullptr) {
    detail::device_scope scope(device_);
    nccl::api().comm_abort(comm_);
    comm_ = nullptr;
  }
}

void nccl_communicator::begin(const char* op, std::uint64_t count) {
  if (destroyed_) throw invalid_state(std::string("this NCCL communicator has been destroyed (") + op + ")");
  if (comm_ == nullptr) throw comm_aborted("aborted: rank " + std::to_string(rank_) + " failed: " + abort_reason_);
  if (count == 0) range_error("count", "a positive integer", 0);
  nccl::result_t async = nccl::ncclSuccess;
  const nccl::functions& f = nccl::api();
  if (f.comm_get_async_error(comm_, &async) == nccl::ncclSuccess && async != nccl::ncclSuccess && async != nccl::ncclInProgress) {
    throw comm_aborted(std::string("aborted: the NCCL communicator failed before ") + op + ": " + nccl::describe(async, comm_));
  }
}

void nccl_communicator::finish(nccl::result_t result, const char* call) {
  if (result == nccl::ncclRemoteError) throw comm_aborted(std::string("aborted: ") + call + " failed: " + nccl::describe(result, comm_));
  nccl::check(result, call, comm_);
}

void nccl_communicator::all_reduce(float* buffer, std::uint64_t count, stream_handle stream) {
  check_pointer(buffer, "buffer");
  begin("allReduce", count);
  detail::device_scope scope(device_);
  finish(nccl::api().all_reduce(buffer, buffer, count, nccl::ncclFloat32, nccl::ncclSum, comm_, stream), "ncclAllReduce");
}

void nccl_communicator::all_gather(const float* send, float* recv, std::uint64_t count, stream_handle stream) {
  check_pointer(send, "send");
  check_pointer(recv, "recv");
  begin("allGather", count);
  detail::device_scope scope(device_);
  finish(nccl::api().all_gather(send, recv, count, nccl::ncclFloat32, comm_, stream), "ncclAllGather");
}

void nccl_communicator::broadcast(float* buffer, std::uint64_t count, int root, stream_handle stream) {
  check_pointer(buffer, "buffer");
  if (root < 0 || root >= size_) range_error("root", "an integer in [0, " + std::to_string(size_ - 1) + "]", root);
  begin("broadcast", count);
  detail::device_scope scope(device_);
  finish(nccl::api().broadcast(buffer, buffer, count, nccl::ncclFloat32, root, comm_, stream), "ncclBroadcast");
}

}  // namespace gpumem::comm
#endif
