// Per-stream workspaces: the memory the GPU ops need besides their inputs and outputs (the
// reductions' per-block partial sums, cuBLAS's workspace), given by the caller from its allocator
// so that every byte a training run uses is counted by that run's allocator.
//
// A caller binds one workspace to each stream it hands to the ops, of at least workspace_bytes()
// bytes, and unbinds it (after the stream's work is done) before freeing it. While bound, the
// pointers never change, so work captured into a CUDA Graph keeps valid addresses. Ops on a stream
// with no workspace (direct calls, tests) fall back to allocating from the driver; each such
// allocation is counted (unbound_allocations), so a caller can check that it never falls back.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "gpumem/stream.hpp"

namespace gpumem::ops {

struct workspace_sizes {
  std::size_t scratch_bytes = 0;  // the reductions' partials (see scratch_bound_bytes)
  std::size_t blas_bytes = 0;     // cuBLAS's workspace
};

// The largest scratch any op asks for, whatever its sizes: bias_grad's column slabs
// (bias_slab_cols columns x at most bias_max_chunks chunks of f32 partials) and the loss kernels'
// capped blocks (loss_max_blocks x one f32 loss and one i32 count); layer_norm_backward's column
// slabs take two partials per chunk with half the chunks. bias.cu, loss.cu and norm.cu assert that
// their requests stay under it.
constexpr std::size_t bias_max_chunks = 512;
constexpr std::size_t bias_slab_cols = 1024;
constexpr std::size_t loss_max_blocks = 65536;
constexpr std::size_t scratch_bound_bytes =
    bias_max_chunks * bias_slab_cols * 4 > loss_max_blocks * 8 ? bias_max_chunks * bias_slab_cols * 4
                                                               : loss_max_blocks * 8;
// cuBLAS's recommended workspace for Hopper.
constexpr std::size_t blas_workspace_bytes = std::size_t(32) << 20;

// What a stream's workspace must hold: on the GPU, scratch_bound_bytes and (when cuBLAS loads)
// blas_workspace_bytes; on the CPU nothing (the CPU references need no scratch).
workspace_sizes workspace_bytes(bool on_device);

// Binds [scratch, +scratch_bytes) and [blas, +blas_bytes) to `stream`. Throws invalid_argument for
// sizes under workspace_bytes(on_device) or a null pointer with a non-zero size, invalid_state when
// the stream already has a workspace (unbind it first).
void bind_stream_workspace(bool on_device, stream_handle stream, void* scratch, std::size_t scratch_bytes, void* blas,
                           std::size_t blas_bytes);
// Forgets the stream's workspace; cuBLAS stops referring to it before this returns. Throws
// invalid_state when none is bound.
void unbind_stream_workspace(bool on_device, stream_handle stream);

// Allocations the GPU ops made themselves because a stream had no workspace bound.
std::uint64_t unbound_allocations();

namespace workspace {
struct binding {
  void* scratch = nullptr;
  std::size_t scratch_bytes = 0;
  void* blas = nullptr;
  std::size_t blas_bytes = 0;
};
// The GPU stream's workspace, if bound.
std::optional<binding> find(stream_handle stream);
// Counts one fallback allocation.
void count_unbound_allocation();
}  // namespace workspace

}  // namespace gpumem::ops
