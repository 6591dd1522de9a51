// The GPU matrix products, one and strided-batched: cuBLAS's sgemm / sgemmStridedBatched when
// libcublas loads (full FP32, cuBLAS's default math mode), else a tiled shared-memory kernel. GPUMEM_GEMM=tiled in the environment (read at every
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

// Where the tiled kernel finds its matrices: leading dimensions (elements per stored row) and, for a
// batch, the distance between consecutive matrices (in elements; 0 for a single product).
struct tiled_layout {
  int lda, ldb, ldc;
  long long stride_a, stride_b, stride_c;
};

// 64x64 tile of C per block of 256 threads, 4x4 per thread; tiles of op(A) and op(B) staged in
// shared memory as [k][m] and [k][n]. Blocks: x over M tiles, y over N tiles, z over the batch
// (from batch0). alpha == 0: A and B are not read.
template <bool TA, bool TB>
__global__ void __launch_bounds__(tile_threads)
    sgemm_tiled_kernel(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                       float beta, float* __restrict__ C, tiled_layout L, long long batch0) {
  __shared__ float As[tile_k][tile_m + 4];
  __shared__ float Bs[tile_k][tile_n + 4];
  const long long z = batch0 + blockIdx.z;
  A += z * L.stride_a;
  B += z * L.stride_b;
  C += z * L.stride_c;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const std::int64_t m0 = std::int64_t(blockIdx.x) * tile_m, n0 = std::int64_t(blockIdx.y) * tile_n;
  float acc[4][4] = {};
  for (int k0 = 0; alpha != 0.0f && k0 < K; k0 += tile_k) {
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int idx = threadIdx.x + l * tile_threads;
      // consecutive threads read consecutive addresses of the stored matrix
      const int mm = TA ? idx % tile_m : idx / tile_k;
      const int kk = TA ? idx / tile_m : idx % tile_k;
      const std::int64_t gm = m0 + mm, gk = k0 + kk;
      As[kk][mm] = (gm < M && gk < K) ? (TA ? A[gk * L.lda + gm] : A[gm * L.lda + gk]) : 0.0f;
    }
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int idx = threadIdx.x + l * tile_threads;
      const int nn = TB ? idx / tile_k : idx % tile_n;
      const int kk = TB ? idx % tile_k : idx / tile_n;
      const std::int64_t gn = n0 + nn, gk = k0 + kk;
      Bs[kk][nn] = (gn < N && gk < K) ? (TB ? B[gn * L.ldb + gk] : B[gk * L.ldb + gn]) : 0.0f;
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
      float* c = C + gm * L.ldc + gn;
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

// `batch` products (grid z, at most 65535 per launch).
void gemm_tiled(cudaStream_t st, bool ta, bool tb, int M, int N, int K, float alpha, const float* A, const float* B,
                float beta, float* C, const tiled_layout& L, long long batch) {
  const unsigned gx = unsigned((M + tile_m - 1) / tile_m), gy = unsigned((N + tile_n - 1) / tile_n);
  if (gy > 65535) throw invalid_argument(invalid_argument::kind::range, "N", "N too large for the tiled gemm");
  for (long long b0 = 0; b0 < batch; b0 += 65535) {
    const dim3 grid(gx, gy, unsigned(batch - b0 < 65535 ? batch - b0 : 65535));
    if (!ta && !tb)
      sgemm_tiled_kernel<false, false><<<grid, tile_threads, 0, st>>>(M, N, K, alpha, A, B, beta, C, L, b0);
    else if (ta && !tb)
      sgemm_tiled_kernel<true, false><<<grid, tile_threads, 0, st>>>(M, N, K, alpha, A, B, beta, C, L, b0);
    else if (!ta && tb)
      sgemm_tiled_kernel<false, true><<<grid, tile_threads, 0, st>>>(M, N, K, alpha, A, B, beta, C, L, b0);
    else sgemm_tiled_kernel<true, true><<<grid, tile_threads, 0, st>>>(M, N, K, alpha, A, B, beta, C, L, b0);
    check_launch("gemm (tiled) launch");
  }
}

}  // namespace

gemm_backend_info gemm_backend() {
  if (forced_tiled()) return {"tiled", "forced by GPUMEM_GEMM=tiled"};
  const cublas::load_status& s = cublas::load();
  if (s.loaded)
    return {"cublas", "loaded " + s.library + " (cublasSgemm_v2" +
                          (cublas::has_sgemm_strided_batched() ? ", cublasSgemmStridedBatched" : "") + ", FP32 math)"};
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
  gemm_tiled(st, ta, tb, m, n, k, alpha, A, B, beta, C, tiled_layout{ta ? m : k, tb ? k : n, n, 0, 0, 0}, 1);
}

// Row-major C_i = op(A_i) op(B_i) is column-major C_i^T = op(B_i)^T op(A_i)^T, as for gemm; a row-major
// matrix with leading dimension ld is a column-major one with the same ld, so lda, ldb, ldc pass as given.
void gemm_strided_batched(stream_handle s, bool ta, bool tb, i64 M, i64 N, i64 K, float alpha, const float* A,
                          i64 lda, i64 stride_a, const float* B, i64 ldb, i64 stride_b, float beta, float* C, i64 ldc,
                          i64 stride_c, i64 batch) {
  cudaStream_t st = as_cuda(s);
  const int m = int(M), n = int(N), k = int(K);
  if (!forced_tiled() && cublas::has_sgemm_strided_batched()) {
    cublas::sgemm_strided_batched(st, tb ? cublas::op_t : cublas::op_n, ta ? cublas::op_t : cublas::op_n, n, m, k,
                                  alpha, B, int(ldb), stride_b, A, int(lda), stride_a, beta, C, int(ldc), stride_c,
                                  int(batch));
    return;
  }
  gemm_tiled(st, ta, tb, m, n, k, alpha, A, B, beta, C,
             tiled_layout{int(lda), int(ldb), int(ldc), stride_a, stride_b, stride_c}, batch);
}

}  // namespace gpumem::ops::gpu
