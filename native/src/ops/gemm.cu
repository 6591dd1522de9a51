// The GPU matrix product: cuBLAS's sgemm when libcublas loads (full FP32, cuBLAS's default math
// mode), else a tiled shared-memory kernel. GPUMEM_GEMM=tiled in the environment (read at every
// call) forces the tiled kernel, e.g. to test it where cuBLAS is present.
//
// Row-major C[M,N] = op(A) op(B) is column-major C^T[N,M] = op(B)^T op(A)^T: cuBLAS gets B as its
// first operand and A as its second, with M and N swapped.
#include <cstdlib>
#include <cstring>

#include "cublas_loader.hpp"
#include "kernel_common.cuh"

namespace gpumem::ops::gpu {
namespace {

constexpr int tile_m = 64, tile_n = 64, tile_k = 16, tile_threads = 256;

// 64x64 tile of C per block of 256 threads, 4x4 per thread; tiles of op(A) and op(B) staged in
// shared memory as [k][m] and [k][n]. Blocks: x over M tiles, y over N tiles.
template <bool TA, bool TB>
__global__ void __launch_bounds__(tile_threads)
    sgemm_tiled_kernel(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                       float beta, float* __restrict__ C) {
  __shared__ float As[tile_k][tile_m + 4];
  __shared__ float Bs[tile_k][tile_n + 4];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const std::int64_t m0 = std::int64_t(blockIdx.x) * tile_m, n0 = std::int64_t(blockIdx.y) * tile_n;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += tile_k) {
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int idx = threadIdx.x + l * tile_threads;
      // consecutive threads read consecutive addresses of the stored matrix
      const int mm = TA ? idx % tile_m : idx / tile_k;
      const int kk = TA ? idx / tile_m : idx % tile_k;
      const std::int64_t gm = m0 + mm, gk = k0 + kk;
      As[kk][mm] = (gm < M && gk < K) ? (TA ? A[gk * M + gm] : A[gm * K + gk]) : 0.0f;
    }
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int idx = threadIdx.x + l * tile_threads;
      const int nn = TB ? idx / tile_k : idx % tile_n;
      const int kk = TB ? idx % tile_k : idx / tile_n;
      const std::int64_t gn = n0 + nn, gk = k0 + kk;
      Bs[kk][nn] = (gn < N && gk < K) ? (TB ? B[gn * K + gk] : B[gk * N + gn]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < tile_k; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[kk][ty * 4 + i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx * 4 + j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const std::int64_t gm = m0 + ty * 4 + i;
    if (gm >= M) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const std::int64_t gn = n0 + tx * 4 + j;
      if (gn >= N) continue;
      float* c = C + gm * N + gn;
      *c = beta == 0.0f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * *c;  // beta 0: C is not read
    }
  }
}

__global__ void scale_c_kernel(float* C, std::uint64_t n, float beta) {
  GPUMEM_GRID_STRIDE(i, n) C[i] = beta == 0.0f ? 0.0f : beta * C[i];
}

bool forced_tiled() {
  const char* v = std::getenv("GPUMEM_GEMM");
  return v != nullptr && std::strcmp(v, "tiled") == 0;
}

void gemm_tiled(cudaStream_t st, bool ta, bool tb, int M, int N, int K, float alpha, const float* A, const float* B,
                float beta, float* C) {
  const unsigned gx = unsigned((M + tile_m - 1) / tile_m), gy = unsigned((N + tile_n - 1) / tile_n);
  if (gy > 65535) throw invalid_argument(invalid_argument::kind::range, "N", "N too large for the tiled gemm");
  const dim3 grid(gx, gy);
  if (!ta && !tb) sgemm_tiled_kernel<false, false><<<grid, tile_threads, 0, st>>>(M, N, K, alpha, A, B, beta, C);
  else if (ta && !tb) sgemm_tiled_kernel<true, false><<<grid, tile_threads, 0, st>>>(M, N, K, alpha, A, B, beta, C);
  else if (!ta && tb) sgemm_tiled_kernel<false, true><<<grid, tile_threads, 0, st>>>(M, N, K, alpha, A, B, beta, C);
  else sgemm_tiled_kernel<true, true><<<grid, tile_threads, 0, st>>>(M, N, K, alpha, A, B, beta, C);
  check_launch("gemm (tiled) launch");
}

}  // namespace

gemm_backend_info gemm_backend() {
  if (forced_tiled()) return {"tiled", "forced by GPUMEM_GEMM=tiled"};
  const cublas::load_status& s = cublas::load();
  if (s.loaded) return {"cublas", "loaded " + s.library + " (cublasSgemm_v2, FP32 math)"};
  return {"tiled", "cuBLAS could not be loaded: " + s.error};
}

void gemm(stream_handle s, bool ta, bool tb, i64 M, i64 N, i64 K, float alpha, const float* A, const float* B,
          float beta, float* C) {
  cudaStream_t st = as_cuda(s);
  if (K == 0 || alpha == 0.0f) {  // C = beta C; A and B are not read (as in BLAS)
    if (beta != 1.0f) {
      scale_c_kernel<<<grid_for(std::uint64_t(M) * std::uint64_t(N)), block_threads, 0, st>>>(
          C, std::uint64_t(M) * std::uint64_t(N), beta);
      check_launch("gemm (scale C) launch");
    }
    return;
  }
  const int m = int(M), n = int(N), k = int(K);
  if (!forced_tiled() && cublas::load().loaded) {
    cublas::sgemm(st, tb ? cublas::op_t : cublas::op_n, ta ? cublas::op_t : cublas::op_n, n, m, k, alpha, B,
                  tb ? k : n, A, ta ? m : k, beta, C, n);
    return;
  }
  gemm_tiled(st, ta, tb, m, n, k, alpha, A, B, beta, C);
}

}  // namespace gpumem::ops::gpu
