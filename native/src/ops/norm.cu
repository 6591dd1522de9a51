// Layer normalisation and GELU on the GPU.
//
// layerNorm: one warp per row; each lane sums its columns in order, then a fixed xor butterfly, in
// two passes (the mean, then the squared deviations: no cancellation), then a third pass writes Y.
//
// layerNormBackward, deterministic without atomics, in the manner of biasGrad (bias.cu): the column
// sums of dY * xhat (dGamma) and dY (dBeta) first, each block summing a fixed chunk of rows for 32
// columns and a second kernel adding the chunks' partials in a fixed tree; then dX, one warp per row.
// The sums read dY before dX is written (the kernels run in order on the stream), so dX may be dY.
// Wide matrices go in slabs of columns so that the partials (two f32 per chunk and column) stay
// within the bounded scratch of workspace.hpp.
#include <cmath>

#include "kernel_common.cuh"

namespace gpumem::ops::gpu {
namespace {

constexpr unsigned full_mask = 0xffffffffu;
constexpr int row_warps = 8;  // rows in flight per block
constexpr int cs_tx = 32, cs_ty = 8;
constexpr std::size_t norm_max_chunks = bias_max_chunks / 2;  // two partial sums per chunk and column
constexpr std::size_t norm_slab_cols = bias_slab_cols;
static_assert(2 * norm_max_chunks * norm_slab_cols * sizeof(float) <= scratch_bound_bytes, "layerNorm scratch bound");

constexpr float gelu_k = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float gelu_c = 0.044715f;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(full_mask, v, o);
  return v;
}

__global__ void __launch_bounds__(row_warps * 32)
    layer_norm_kernel(const float* X, const float* __restrict__ gamma, const float* __restrict__ beta, float* Y,
                      float* __restrict__ mean, float* __restrict__ rstd, std::int64_t rows, std::int64_t cols,
                      float eps) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = std::int64_t(gridDim.x) * row_warps;
  const float inv_cols = 1.0f / float(cols);
  for (std::int64_t r = std::int64_t(blockIdx.x) * row_warps + threadIdx.x / 32; r < rows; r += warps) {
    const float* x = X + r * cols;
    float* y = Y + r * cols;
    float s = 0.0f;
    for (std::int64_t c = lane; c < cols; c += 32) s += x[c];
    const float mu = warp_sum(s) * inv_cols;
    float sq = 0.0f;
    for (std::int64_t c = lane; c < cols; c += 32) {
      const float d = x[c] - mu;
      sq += d * d;
    }
    const float rs = 1.0f / sqrtf(warp_sum(sq) * inv_cols + eps);
    for (std::int64_t c = lane; c < cols; c += 32) y[c] = (x[c] - mu) * rs * gamma[c] + beta[c];
    if (lane == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
  }
}

// dX for each row, from the row's means of g = dY*gamma and g*xhat.
__global__ void __launch_bounds__(row_warps * 32)
    layer_norm_dx_kernel(const float* dY, const float* __restrict__ X, const float* __restrict__ gamma,
                         const float* __restrict__ mean, const float* __restrict__ rstd, float* dX, std::int64_t rows,
                         std::int64_t cols) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = std::int64_t(gridDim.x) * row_warps;
  const float inv_cols = 1.0f / float(cols);
  for (std::int64_t r = std::int64_t(blockIdx.x) * row_warps + threadIdx.x / 32; r < rows; r += warps) {
    const float* dy = dY + r * cols;
    const float* x = X + r * cols;
    float* dx = dX + r * cols;
    const float mu = mean[r], rs = rstd[r];
    float sg = 0.0f, sgx = 0.0f;
    for (std::int64_t c = lane; c < cols; c += 32) {
      const float g = dy[c] * gamma[c];
      sg += g;
      sgx += g * ((x[c] - mu) * rs);
    }
    const float mean_g = warp_sum(sg) * inv_cols, mean_gx = warp_sum(sgx) * inv_cols;
    for (std::int64_t c = lane; c < cols; c += 32) {
      const float xhat = (x[c] - mu) * rs;
      dx[c] = rs * (dy[c] * gamma[c] - mean_g - xhat * mean_gx);
    }
  }
}

// Block (32, 8), grid (column tiles of the slab [col0, col1), chunks): the chunk's sums of dY*xhat and
// dY for 32 columns, each thread over its rows in order, then the 8 row-lanes in order. One chunk:
// the results go to dGamma and dBeta; else to partial[0 or 1][chunk][col - col0].
__global__ void layer_norm_colsum_kernel(const float* __restrict__ dY, const float* __restrict__ X,
                                         const float* __restrict__ mean, const float* __restrict__ rstd,
                                         std::int64_t rows, std::int64_t cols, std::int64_t col0, std::int64_t col1,
                                         std::int64_t chunk_rows, float* partial, std::int64_t chunks, float* dGamma,
                                         float* dBeta, bool accumulate) {
  __shared__ float sums_g[cs_ty][cs_tx + 1];
  __shared__ float sums_b[cs_ty][cs_tx + 1];
  const std::int64_t col = col0 + std::int64_t(blockIdx.x) * cs_tx + threadIdx.x;
  const std::int64_t r0 = std::int64_t(blockIdx.y) * chunk_rows;
  const std::int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  float acc_g = 0.0f, acc_b = 0.0f;
  if (col < col1) {
    for (std::int64_t r = r0 + threadIdx.y; r < r1; r += cs_ty) {
      const float d = dY[r * cols + col];
      acc_g += d * ((X[r * cols + col] - mean[r]) * rstd[r]);
      acc_b += d;
    }
  }
  sums_g[threadIdx.y][threadIdx.x] = acc_g;
  sums_b[threadIdx.y][threadIdx.x] = acc_b;
  __syncthreads();
  if (threadIdx.y != 0 || col >= col1) return;
  float sg = sums_g[0][threadIdx.x], sb = sums_b[0][threadIdx.x];
  for (int k = 1; k < cs_ty; ++k) {
    sg += sums_g[k][threadIdx.x];
    sb += sums_b[k][threadIdx.x];
  }
  if (gridDim.y == 1) {
    dGamma[col] = accumulate ? dGamma[col] + sg : sg;
    dBeta[col] = accumulate ? dBeta[col] + sb : sb;
  } else {
    const std::int64_t width = col1 - col0;
    partial[std::int64_t(blockIdx.y) * width + (col - col0)] = sg;
    partial[(chunks + std::int64_t(blockIdx.y)) * width + (col - col0)] = sb;
  }
}

// One warp per column of the slab [col0, col0 + width): lane l sums chunks l, l+32, ... in order, then a
// fixed butterfly; both partial arrays.
__global__ void layer_norm_colsum_finish_kernel(const float* __restrict__ partial, std::int64_t chunks,
                                                std::int64_t col0, std::int64_t width, float* dGamma, float* dBeta,
                                                bool accumulate) {
  const std::int64_t warps = (std::int64_t(gridDim.x) * blockDim.x) / 32;
  const int lane = threadIdx.x & 31;
  for (std::int64_t c = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; c < width; c += warps) {
    float sg = 0.0f, sb = 0.0f;
    for (std::int64_t k = lane; k < chunks; k += 32) {
      sg += partial[k * width + c];
      sb += partial[(chunks + k) * width + c];
    }
    sg = warp_sum(sg);
    sb = warp_sum(sb);
    if (lane == 0) {
      dGamma[col0 + c] = accumulate ? dGamma[col0 + c] + sg : sg;
      dBeta[col0 + c] = accumulate ? dBeta[col0 + c] + sb : sb;
    }
  }
}

__global__ void gelu_kernel(const float* X, float* Y, std::uint64_t n) {
  GPUMEM_GRID_STRIDE(i, n) {
    const float x = X[i];
    Y[i] = 0.5f * x * (1.0f + tanhf(gelu_k * (x + gelu_c * x * x * x)));
  }
}

__global__ void gelu_backward_kernel(const float* __restrict__ X, const float* dY, float* dX, std::uint64_t n) {
  GPUMEM_GRID_STRIDE(i, n) {
    const float x = X[i];
    const float t = tanhf(gelu_k * (x + gelu_c * x * x * x));
    const float d = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * gelu_k * (1.0f + 3.0f * gelu_c * x * x);
    dX[i] = dY[i] * d;
  }
}

unsigned row_blocks(std::int64_t rows) { return grid_for(std::uint64_t(rows) * 32, row_warps * 32); }

}  // namespace

void layer_norm(stream_handle s, const float* X, const float* gamma, const float* beta, float* Y, float* mean,
                float* rstd, i64 rows, i64 cols, float eps) {
  layer_norm_kernel<<<row_blocks(rows), row_warps * 32, 0, as_cuda(s)>>>(X, gamma, beta, Y, mean, rstd, rows, cols,
                                                                         eps);
  check_launch("layerNorm launch");
}

void layer_norm_backward(stream_handle s, const float* dY, const float* X, const float* gamma, const float* mean,
                         const float* rstd, float* dX, float* dGamma, float* dBeta, i64 rows, i64 cols,
                         bool accumulate) {
  // At most norm_max_chunks chunks of a multiple of 8 rows (at least 64), as biasGrad chunks its rows.
  i64 chunk_rows = (rows + i64(norm_max_chunks) - 1) / i64(norm_max_chunks);
  chunk_rows = ((chunk_rows + 7) / 8) * 8;
  if (chunk_rows < 64) chunk_rows = 64;
  const i64 chunks = (rows + chunk_rows - 1) / chunk_rows;
  const i64 slab = cols < i64(norm_slab_cols) ? cols : i64(norm_slab_cols);
  const std::size_t scratch_bytes = chunks > 1 ? 2 * std::size_t(chunks) * std::size_t(slab) * sizeof(float) : 0;
  stream_scratch scratch(scratch_bytes, s);
  cudaStream_t st = as_cuda(s);
  for (i64 col0 = 0; col0 < cols; col0 += slab) {
    const i64 col1 = col0 + slab < cols ? col0 + slab : cols;
    const i64 col_tiles = (col1 - col0 + cs_tx - 1) / cs_tx;
    layer_norm_colsum_kernel<<<dim3(unsigned(col_tiles), unsigned(chunks)), dim3(cs_tx, cs_ty), 0, st>>>(
        dY, X, mean, rstd, rows, cols, col0, col1, chunk_rows, scratch.as<float>(), chunks, dGamma, dBeta, accumulate);
    check_launch("layerNormBackward (column sums) launch");
    if (chunks > 1) {
      layer_norm_colsum_finish_kernel<<<grid_for(std::uint64_t(col1 - col0) * 32), block_threads, 0, st>>>(
          scratch.as<float>(), chunks, col0, col1 - col0, dGamma, dBeta, accumulate);
      check_launch("layerNormBackward (column sums, finish) launch");
    }
  }
  layer_norm_dx_kernel<<<row_blocks(rows), row_warps * 32, 0, st>>>(dY, X, gamma, mean, rstd, dX, rows, cols);
  check_launch("layerNormBackward (dX) launch");
}

void gelu(stream_handle s, const float* X, float* Y, i64 n) {
  gelu_kernel<<<grid_for(std::uint64_t(n)), block_threads, 0, as_cuda(s)>>>(X, Y, std::uint64_t(n));
  check_launch("gelu launch");
}

void gelu_backward(stream_handle s, const float* X, const float* dY, float* dX, i64 n) {
  gelu_backward_kernel<<<grid_for(std::uint64_t(n)), block_threads, 0, as_cuda(s)>>>(X, dY, dX, std::uint64_t(n));
  check_launch("geluBackward launch");
}

}  // namespace gpumem::ops::gpu
