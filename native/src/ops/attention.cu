// Attention's layout changes and causal softmax on the GPU.
//
// headsToBatch / batchToHeads: one thread per element of Y ([B,H,T,D]), four elements at a time
// (float4) when D, ldx and both pointers allow it.
//
// The softmaxes: one warp per query row (row i of a TxT matrix sees keys 0..i). The forward keeps
// a running maximum and sum per lane over its keys (an online softmax: one read of S for the
// statistics, one for the output), then combines the lanes' pairs in a fixed xor butterfly; every
// lane ends with the same maximum and sum, so the result does not depend on timing. The backward's
// dot product is summed the same way. Each element is read and written by the same lane, after the
// row's reduction, so P may be S and dS may be dP.
#include <cmath>

#include "kernel_common.cuh"

namespace gpumem::ops::gpu {
namespace {

constexpr unsigned full_mask = 0xffffffffu;
constexpr int softmax_warps = 8;  // warps (query rows in flight) per block

// Where element i of the [B*H, T, D] layout stands in the [B, T, ldx] one (head h at columns
// h*D..): the index map both layout changes walk, one each way.
__device__ __forceinline__ std::int64_t token_major_offset(std::uint64_t i, std::int64_t ldx, std::int64_t T,
                                                           std::int64_t H, std::int64_t D) {
  const std::int64_t d = std::int64_t(i % std::uint64_t(D));
  const std::int64_t bht = std::int64_t(i / std::uint64_t(D));
  const std::int64_t t = bht % T, bh = bht / T;
  const std::int64_t h = bh % H, b = bh / H;
  return (b * T + t) * ldx + h * D + d;
}

template <class V>
__global__ void heads_to_batch_kernel(const V* __restrict__ X, std::int64_t ldx, V* __restrict__ Y, std::int64_t T,
                                      std::int64_t H, std::int64_t D, std::uint64_t total) {
  GPUMEM_GRID_STRIDE(i, total) Y[i] = X[token_major_offset(i, ldx, T, H, D)];
}

template <class V>
__global__ void batch_to_heads_kernel(const V* __restrict__ Y, V* __restrict__ X, std::int64_t ldx, std::int64_t T,
                                      std::int64_t H, std::int64_t D, std::uint64_t total) {
  GPUMEM_GRID_STRIDE(i, total) X[token_major_offset(i, ldx, T, H, D)] = Y[i];
}

// Whether X (leading dimension ldx) and Y can move as float4: D and ldx multiples of 4, both aligned.
bool vec4(const void* X, i64 ldx, const void* Y, i64 D) { return D % 4 == 0 && ldx % 4 == 0 && aligned16(X) && aligned16(Y); }

// The pair (max, sum of exp(x - max)) of two sets of values; a set with no values is (-inf, 0).
__device__ __forceinline__ void softmax_combine(float& m, float& s, float om, float os) {
  const float nm = fmaxf(m, om);
  if (nm == -INFINITY) return;  // both empty
  const float a = m == -INFINITY ? 0.0f : s * expf(m - nm);
  const float b = om == -INFINITY ? 0.0f : os * expf(om - nm);
  m = nm;
  s = a + b;
}

__global__ void __launch_bounds__(softmax_warps * 32)
    causal_softmax_kernel(const float* S, float* P, std::int64_t queries, std::int64_t T, float scale) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = std::int64_t(gridDim.x) * softmax_warps;
  for (std::int64_t q = std::int64_t(blockIdx.x) * softmax_warps + threadIdx.x / 32; q < queries; q += warps) {
    const std::int64_t i = q % T;
    const float* s = S + q * T;
    float* p = P + q * T;
    float m = -INFINITY, sum = 0.0f;
    for (std::int64_t j = lane; j <= i; j += 32) {
      const float v = scale * s[j];
      if (v > m) {
        sum = (m == -INFINITY ? 0.0f : sum * expf(m - v)) + 1.0f;
        m = v;
      } else {
        sum += expf(v - m);
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float om = __shfl_xor_sync(full_mask, m, o), os = __shfl_xor_sync(full_mask, sum, o);
      softmax_combine(m, sum, om, os);
    }
    const float inv = 1.0f / sum;
    for (std::int64_t j = lane; j < T; j += 32) p[j] = j <= i ? expf(scale * s[j] - m) * inv : 0.0f;
  }
}

__global__ void __launch_bounds__(softmax_warps * 32)
    causal_softmax_backward_kernel(const float* __restrict__ P, const float* dP, float* dS, std::int64_t queries,
                                   std::int64_t T, float scale) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = std::int64_t(gridDim.x) * softmax_warps;
  for (std::int64_t q = std::int64_t(blockIdx.x) * softmax_warps + threadIdx.x / 32; q < queries; q += warps) {
    const std::int64_t i = q % T;
    const float* p = P + q * T;
    const float* dp = dP + q * T;
    float* ds = dS + q * T;
    float dot = 0.0f;
    for (std::int64_t j = lane; j <= i; j += 32) dot += p[j] * dp[j];
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(full_mask, dot, o);
    for (std::int64_t j = lane; j < T; j += 32) ds[j] = j <= i ? scale * p[j] * (dp[j] - dot) : 0.0f;
  }
}

unsigned softmax_blocks(std::int64_t queries) {
  return grid_for(std::uint64_t(queries) * 32, softmax_warps * 32);
}

}  // namespace

void heads_to_batch(stream_handle s, const float* X, i64 ldx, float* Y, i64 B, i64 T, i64 H, i64 D) {
  const std::uint64_t total = std::uint64_t(B) * std::uint64_t(H) * std::uint64_t(T) * std::uint64_t(D);
  if (vec4(X, ldx, Y, D)) {
    heads_to_batch_kernel<float4><<<grid_for(total / 4), block_threads, 0, as_cuda(s)>>>(
        reinterpret_cast<const float4*>(X), ldx / 4, reinterpret_cast<float4*>(Y), T, H, D / 4, total / 4);
  } else {
    heads_to_batch_kernel<float><<<grid_for(total), block_threads, 0, as_cuda(s)>>>(X, ldx, Y, T, H, D, total);
  }
  check_launch("headsToBatch launch");
}

void batch_to_heads(stream_handle s, const float* Y, float* X, i64 ldx, i64 B, i64 T, i64 H, i64 D) {
  const std::uint64_t total = std::uint64_t(B) * std::uint64_t(H) * std::uint64_t(T) * std::uint64_t(D);
  if (vec4(X, ldx, Y, D)) {
    batch_to_heads_kernel<float4><<<grid_for(total / 4), block_threads, 0, as_cuda(s)>>>(
        reinterpret_cast<const float4*>(Y), reinterpret_cast<float4*>(X), ldx / 4, T, H, D / 4, total / 4);
  } else {
    batch_to_heads_kernel<float><<<grid_for(total), block_threads, 0, as_cuda(s)>>>(Y, X, ldx, T, H, D, total);
  }
  check_launch("batchToHeads launch");
}

void causal_softmax(stream_handle s, const float* S, float* P, i64 rows, i64 T, float scale) {
  const std::int64_t queries = rows * T;
  causal_softmax_kernel<<<softmax_blocks(queries), softmax_warps * 32, 0, as_cuda(s)>>>(S, P, queries, T, scale);
  check_launch("causalSoftmax launch");
}

void causal_softmax_backward(stream_handle s, const float* P, const float* dP, float* dS, i64 rows, i64 T,
                             float scale) {
  const std::int64_t queries = rows * T;
  causal_softmax_backward_kernel<<<softmax_blocks(queries), softmax_warps * 32, 0, as_cuda(s)>>>(P, dP, dS, queries,
                                                                                                 T, scale);
  check_launch("causalSoftmaxBackward launch");
}

}  // namespace gpumem::ops::gpu
