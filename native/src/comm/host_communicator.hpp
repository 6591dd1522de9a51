// A communicator over POSIX shared memory, for ranks that are processes of one machine: CPU runs,
// and ranks whose buffers live on a GPU but cannot use NCCL (e.g. two ranks on one GPU). The parent
// creates a region (create_host_region) with a header and one slot per rank; each rank attaches by
// name. A collective moves its data through the slots a slot at a time (larger ones in chunks),
// with a barrier on atomics in the mapping between writing and reading. Elements are f32.
//
// Every rank sums the slots in rank order 0..size-1, so all ranks get bit-identical results. A
// wait ends early when any rank or the parent aborts the region, when the process that created
// the region has exited (checked every ~50 ms of waiting), and after timeout_ms: all throw
// comm_aborted saying why. Buffers on a CUDA device (device >= 0, CUDA builds) are staged with
// cudaMemcpyAsync on the collective's stream; host buffers (device -1) are copied directly.
#pragma once
#include <cstdint>
#include <string>

#include "gpumem/stream.hpp"

namespace gpumem::comm {

constexpr std::uint64_t default_host_slot_bytes = 4ull << 20;
constexpr int max_host_ranks = 4096;

// Parent side. Creates a region for `size` ranks with slots of `slot_bytes` (a multiple of 4, at
// least 64) under a new unique name (/gpumem-<pid>-<n>-<random>), which it returns. The creating
// process keeps the region mapped until unlink_host_region, so that it can abort the group after
// the name is gone. With unlink_when_attached, the rank whose attach completes the group removes
// the name: from then on nothing outlives the processes that map the region (the kernel frees it
// with the last mapping), even when the parent is killed.
std::string create_host_region(int size, std::uint64_t slot_bytes, bool unlink_when_attached = false);
// Stops the group: every rank's next wait (or the one it is in) throws comm_aborted with
// "aborted: rank <rank> failed: <reason>" (rank -1: "aborted: <reason>"). The first abort wins.
// Works on a region this process created even after its name was removed.
void abort_host_region(const std::string& name, int rank, const std::string& reason);
// Removes the region's name (mappings already made stay valid) and this process's own mapping of
// a region it created. False when there was no name (already removed).
bool unlink_host_region(const std::string& name);

class host_communicator {
 public:
  // Attaches as `rank` of the region `name`, which must have been created for `size` ranks.
  // timeout_ms bounds each wait for the other ranks (0: no bound).
  host_communicator(const std::string& name, int size, int rank, int device, std::uint64_t timeout_ms);
  ~host_communicator();
  host_communicator(const host_communicator&) = delete;
  host_communicator& operator=(const host_communicator&) = delete;

  // In place: `count` elements at `buffer` become their sum over the ranks.
  void all_reduce(float* buffer, std::uint64_t count, stream_handle stream);
  // Each rank's `count` elements at `send` go to recv + rank * count on every rank (send may be
  // that very place in recv).
  void all_gather(const float* send, float* recv, std::uint64_t count, stream_handle stream);
  // Rank `root`'s `count` elements at `buffer` are copied to `buffer` on the other ranks.
  void broadcast(float* buffer, std::uint64_t count, int root, stream_handle stream);

  // Aborts the region in this rank's name: the other ranks stop at their next wait.
  void abort(const std::string& reason);
  // Detaches (unmaps); later calls throw invalid_state. Idempotent.
  void destroy() noexcept;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  std::uint64_t slot_bytes() const noexcept { return slot_bytes_; }

 private:
  struct region;
  void begin(const char* op, stream_handle stream);
  // Runs a collective of `count` floats a slot at a time: begin(op, stream), then, on the
  // communicator's device, chunk(offset, n) for each run of at most a slot's floats.
  template <class Chunk>
  void in_chunks(const char* op, stream_handle stream, std::uint64_t count, Chunk&& chunk);
  void barrier(const char* op);
  float* slot(int rank) const;
  void to_slot(float* slot, const float* src, std::uint64_t n);
  void from_slot(float* dst, const float* slot, std::uint64_t n);
  void finish_copies();

  region* region_ = nullptr;
  int size_;
  int rank_;
  int device_;
  std::uint64_t timeout_ms_;
  std::uint64_t slot_bytes_ = 0;
  std::uint64_t barriers_ = 0;  // barriers this rank has entered
  stream_handle stream_ = nullptr;  // the running collective's stream
};

}  // namespace gpumem::comm
