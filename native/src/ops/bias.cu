// Bias add and its gradient on the GPU. biasGrad is deterministic: each block sums a fixed chunk
// of rows for 32 columns (each thread its rows in order, then the 8 row-lanes in order); a second
// kernel adds the chunks' partials in a fixed tree (one warp per column). The chunking depends on
// the sizes only, so the result does not change with the device or the run. Wide matrices are done
// in slabs of bias_slab_cols columns (one pair of launches each), so the partials never need more
// than the bounded scratch of workspace.hpp; each column's sum is the same with or without slabs.
#include "kernel_common.cuh"

namespace gpumem::ops::gpu {
namespace {

// With relu, Y = max(Y + bias, 0): the bias add and the ReLU that follows it, in one pass.
__device__ __forceinline__ float bias_out(float y, float b, bool relu) {
  const float v = y + b;
  return relu ? fmaxf(v, 0.0f) : v;
}

__global__ void add_bias_kernel(float* Y, const float* __restrict__ bias, std::uint64_t total, std::uint64_t cols,
                                bool relu) {
  GPUMEM_GRID_STRIDE(i, total) Y[i] = bias_out(Y[i], bias[i % cols], relu);
}

__global__ void add_bias4_kernel(float4* Y, const float4* __restrict__ bias, std::uint64_t total4,
                                 std::uint64_t cols4, bool relu) {
  GPUMEM_GRID_STRIDE(i, total4) {
    float4 y = Y[i];
    const float4 b = bias[i % cols4];
    y.x = bias_out(y.x, b.x, relu);
    y.y = bias_out(y.y, b.y, relu);
    y.z = bias_out(y.z, b.z, relu);
    y.w = bias_out(y.w, b.w, relu);
    Y[i] = y;
  }
}

constexpr int bg_tx = 32, bg_ty = 8;
constexpr int unrolled_chunk = 64;  // the smallest chunk (see bias_grad): 8 rows per thread

// Block (32, 8), grid (column tiles of the slab [col0, col1), chunks). Writes the chunk's column
// sums to partial[chunk][col - col0], or, with one chunk, the result to dBias. With a ReLU output Y, each element of dY
// is first masked by Y > 0 and written back (ReLU's backward fused in: every element has one reader).
__global__ void bias_grad_chunk_kernel(float* dY, const float* __restrict__ Y, std::int64_t rows, std::int64_t cols,
                                       std::int64_t col0, std::int64_t col1, std::int64_t chunk_rows, float* partial,
                                       float* dBias, bool accumulate) {
  __shared__ float sums[bg_ty][bg_tx + 1];
  const std::int64_t col = col0 + std::int64_t(blockIdx.x) * bg_tx + threadIdx.x;
  const std::int64_t r0 = std::int64_t(blockIdx.y) * chunk_rows;
  std::int64_t r1 = r0 + chunk_rows;
  if (r1 > rows) r1 = rows;
  float acc = 0.0f;
  if (col < col1 && chunk_rows == unrolled_chunk) {
    // The usual chunk (any rows up to 512 * 64): at most 8 rows per thread, all loads issued before
    // the first add, then masked, stored and summed in the same order as the loop below.
    float v[unrolled_chunk / bg_ty], y[unrolled_chunk / bg_ty];
#pragma unroll
    for (int k = 0; k < unrolled_chunk / bg_ty; ++k) {
      const std::int64_t r = r0 + threadIdx.y + k * bg_ty;
      v[k] = r < r1 ? dY[r * cols + col] : 0.0f;
      y[k] = (Y != nullptr && r < r1) ? Y[r * cols + col] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < unrolled_chunk / bg_ty; ++k) {
      const std::int64_t r = r0 + threadIdx.y + k * bg_ty;
      if (r >= r1) break;
      if (Y != nullptr) {
        v[k] = y[k] > 0.0f ? v[k] : 0.0f;
        dY[r * cols + col] = v[k];
      }
      acc += v[k];
    }
  } else if (col < col1) {
    for (std::int64_t r = r0 + threadIdx.y; r < r1; r += bg_ty) {
      float v = dY[r * cols + col];
      if (Y != nullptr) {
        v = Y[r * cols + col] > 0.0f ? v : 0.0f;
        dY[r * cols + col] = v;
      }
      acc += v;
    }
  }
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < col1) {
    float s = sums[0][threadIdx.x];
    for (int k = 1; k < bg_ty; ++k) s += sums[k][threadIdx.x];
    if (gridDim.y == 1) dBias[col] = accumulate ? dBias[col] + s : s;
    else partial[std::int64_t(blockIdx.y) * (col1 - col0) + (col - col0)] = s;
  }
}

// One warp per column of the slab [col0, col0 + width): lane l sums chunks l, l+32, ... in order,
// then a fixed butterfly.
__global__ void bias_grad_finish_kernel(const float* __restrict__ partial, std::int64_t chunks, std::int64_t col0,
                                        std::int64_t width, float* dBias, bool accumulate) {
  const std::int64_t warps = (std::int64_t(gridDim.x) * blockDim.x) / 32;
  const int lane = threadIdx.x & 31;
  for (std::int64_t c = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; c < width; c += warps) {
    float s = 0.0f;
    for (std::int64_t k = lane; k < chunks; k += 32) s += partial[k * width + c];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) dBias[col0 + c] = accumulate ? dBias[col0 + c] + s : s;
  }
}

}  // namespace

void add_bias(stream_handle s, float* Y, const float* bias, i64 rows, i64 cols, bool relu) {
  const std::uint64_t total = std::uint64_t(rows) * std::uint64_t(cols);
  if (cols % 4 == 0 && aligned16(Y) && aligned16(bias)) {
    add_bias4_kernel<<<grid_for(total / 4), block_threads, 0, as_cuda(s)>>>(
        reinterpret_cast<float4*>(Y), reinterpret_cast<const float4*>(bias), total / 4, std::uint64_t(cols) / 4, relu);
  } else {
    add_bias_kernel<<<grid_for(total), block_threads, 0, as_cuda(s)>>>(Y, bias, total, std::uint64_t(cols), relu);
  }
  check_launch("addBias launch");
}

void bias_grad(stream_handle s, float* dY, const float* relu_out, float* dBias, i64 rows, i64 cols, bool accumulate) {
  if (rows == 0) {
    if (!accumulate) detail::check_cuda(cudaMemsetAsync(dBias, 0, std::size_t(cols) * 4, as_cuda(s)), "biasGrad memset");
    return;
  }
  // At most bias_max_chunks (512) chunks of a multiple of 8 rows (at least 64).
  i64 chunk_rows = (rows + i64(bias_max_chunks) - 1) / i64(bias_max_chunks);
  chunk_rows = ((chunk_rows + 7) / 8) * 8;
  if (chunk_rows < 64) chunk_rows = 64;
  const i64 chunks = (rows + chunk_rows - 1) / chunk_rows;
  const i64 slab = cols < i64(bias_slab_cols) ? cols : i64(bias_slab_cols);
  const std::size_t scratch_bytes = chunks > 1 ? std::size_t(chunks) * std::size_t(slab) * sizeof(float) : 0;
  static_assert(bias_max_chunks * bias_slab_cols * sizeof(float) <= scratch_bound_bytes, "bias_grad scratch bound");
  stream_scratch scratch(scratch_bytes, s);
  for (i64 col0 = 0; col0 < cols; col0 += slab) {
    const i64 col1 = col0 + slab < cols ? col0 + slab : cols;
    const i64 col_tiles = (col1 - col0 + bg_tx - 1) / bg_tx;
    bias_grad_chunk_kernel<<<dim3(unsigned(col_tiles), unsigned(chunks)), dim3(bg_tx, bg_ty), 0, as_cuda(s)>>>(
        dY, relu_out, rows, cols, col0, col1, chunk_rows, scratch.as<float>(), dBias, accumulate);
    check_launch("biasGrad launch");
    if (chunks > 1) {
      // Each slab's partials are read by its finish kernel before the next slab's chunk kernel
      // overwrites them: both run in order on the one stream.
      bias_grad_finish_kernel<<<grid_for(std::uint64_t(col1 - col0) * 32), block_threads, 0, as_cuda(s)>>>(
          scratch.as<float>(), chunks, col0, col1 - col0, dBias, accumulate);
      check_launch("biasGrad finish launch");
    }
  }
}

}  // namespace gpumem::ops::gpu
