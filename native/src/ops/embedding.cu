// Token and position embeddings on the GPU. The forward: one thread per output element. The
// backward: dWte by float atomics (rows of one token from several positions meet in one row of
// dWte, as in scatterAddRows: the one non-deterministic sum here), dWpe without atomics, one
// thread per (t, c) summing b in order. A negative token id is skipped (no wte term, no gradient);
// ids >= V are the caller's to rule out.
#include "kernel_common.cuh"

namespace gpumem::ops::gpu {
namespace {

__global__ void embedding_kernel(const std::int32_t* __restrict__ tokens, const float* __restrict__ wte,
                                 const float* __restrict__ wpe, float* __restrict__ out, std::int64_t T,
                                 std::int64_t C, std::uint64_t total) {
  GPUMEM_GRID_STRIDE(i, total) {
    const std::int64_t r = std::int64_t(i / std::uint64_t(C)), c = std::int64_t(i % std::uint64_t(C));
    const std::int64_t tok = tokens[r];
    const float p = wpe[(r % T) * C + c];
    out[i] = tok >= 0 ? wte[tok * C + c] + p : p;
  }
}

__global__ void embedding_wte_grad_kernel(const float* __restrict__ dOut, const std::int32_t* __restrict__ tokens,
                                          float* dWte, std::int64_t C, std::uint64_t total) {
  GPUMEM_GRID_STRIDE(i, total) {
    const std::int64_t r = std::int64_t(i / std::uint64_t(C)), c = std::int64_t(i % std::uint64_t(C));
    const std::int64_t tok = tokens[r];
    if (tok >= 0) atomicAdd(&dWte[tok * C + c], dOut[i]);
  }
}

__global__ void embedding_wpe_grad_kernel(const float* __restrict__ dOut, float* dWpe, std::int64_t B,
                                          std::int64_t T, std::int64_t C) {
  const std::uint64_t tc = std::uint64_t(T) * std::uint64_t(C);
  GPUMEM_GRID_STRIDE(i, tc) {
    float s = 0.0f;
    for (std::int64_t b = 0; b < B; ++b) s += dOut[std::uint64_t(b) * tc + i];
    dWpe[i] += s;
  }
}

}  // namespace

void embedding(stream_handle s, const std::int32_t* tokens, const float* wte, const float* wpe, float* out, i64 B,
               i64 T, i64 C) {
  const std::uint64_t total = std::uint64_t(B) * std::uint64_t(T) * std::uint64_t(C);
  embedding_kernel<<<grid_for(total), block_threads, 0, as_cuda(s)>>>(tokens, wte, wpe, out, T, C, total);
  check_launch("embedding launch");
}

void embedding_backward(stream_handle s, const float* dOut, const std::int32_t* tokens, float* dWte, float* dWpe,
                        i64 B, i64 T, i64 C) {
  const std::uint64_t total = std::uint64_t(B) * std::uint64_t(T) * std::uint64_t(C);
  embedding_wte_grad_kernel<<<grid_for(total), block_threads, 0, as_cuda(s)>>>(dOut, tokens, dWte, C, total);
  check_launch("embeddingBackward (dWte) launch");
  embedding_wpe_grad_kernel<<<grid_for(std::uint64_t(T) * std::uint64_t(C)), block_threads, 0, as_cuda(s)>>>(
      dOut, dWpe, B, T, C);
  check_launch("embeddingBackward (dWpe) launch");
}

}  // namespace gpumem::ops::gpu
