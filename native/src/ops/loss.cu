// Softmax cross-entropy and accuracy on the GPU: one warp per row (a lane per class when C <= 32,
// lanes striding over the classes otherwise). Deterministic without float atomics: every warp sums
// its rows in order, every block its 8 warps in order into a per-block partial (a block owns a
// fixed range of rows: rows_per_block, or a multiple of it past loss_max_blocks blocks, so the
// partials fit the bounded scratch), and one final block adds the partials in a fixed tree.
// With a step counter (an i32 in device memory), the loss and count go to slot *step of their
// arrays, so that one captured launch sequence can serve every step of an epoch. The fused variant
// (all rows in one block) also writes the bias gradient of the layer that made the logits, the
// column sums of dLogits, in exactly biasGrad's order (bias.cu), so the two agree bit for bit.
#include <cmath>

#include "kernel_common.cuh"

namespace gpumem::ops::gpu {
namespace {

constexpr int warps_per_block = 8;
constexpr int rows_per_block = 64;
constexpr unsigned full = 0xffffffffu;

struct row_result {
  float loss;   // NaN for a bad row or label
  int correct;  // 1 when argmax == label
};

// A block's loss and correct count from its warps' partial sums, added in warp order: the one order
// both loss kernels use, so that the fused kernel's totals are bit-identical to ce_kernel's.
__device__ __forceinline__ row_result sum_in_warp_order(const float* block_loss, const int* block_correct) {
  row_result total{block_loss[0], block_correct[0]};
  for (int w = 1; w < warps_per_block; ++w) {
    total.loss += block_loss[w];
    total.correct += block_correct[w];
  }
  return total;
}

// A batch's results: the mean of its R rows' loss and its correct count go to slot *step of
// loss_out and correct_out (step null: slot 0), where every kernel that finishes a batch writes them.
__device__ __forceinline__ void store_batch_result(row_result total, std::int64_t R, const std::int32_t* step,
                                                   float* loss_out, int* correct_out) {
  const std::int64_t slot = step != nullptr ? std::int64_t(*step) : 0;
  loss_out[slot] = total.loss / static_cast<float>(R);
  correct_out[slot] = total.correct;
}

__device__ __forceinline__ void argmax_combine(float& v, int& idx, float ov, int oidx) {
  // Larger value wins; on a tie the smaller index (the first maximum, as on the CPU).
  if (ov > v || (ov == v && oidx < idx)) {
    v = ov;
    idx = oidx;
  }
}

// One row, by the whole warp. Every lane returns the same result.
template <bool Small, bool Train>
__device__ row_result process_row(const float* __restrict__ x, int label, int C, float inv_r, float* d) {
  const int lane = threadIdx.x & 31;
  const bool valid = label >= 0 && label < C;
  float m;
  int best;
  float s;
  float xl = 0.0f;
  if (Small) {
    const float v = lane < C ? x[lane] : -INFINITY;
    m = v;
    best = lane < C ? lane : 0x7fffffff;
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(full, m, o);
      const int oi = __shfl_xor_sync(full, best, o);
      argmax_combine(m, best, ov, oi);
    }
    if (!Train) return {0.0f, valid && best == label ? 1 : 0};
    const float e = lane < C ? expf(v - m) : 0.0f;
    s = e;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(full, s, o);
    xl = __shfl_sync(full, v, valid ? label : 0);
    if (lane < C) d[lane] = (e / s - (lane == label ? 1.0f : 0.0f)) * inv_r;
  } else {
    m = -INFINITY;
    best = 0x7fffffff;
    for (int j = lane; j < C; j += 32) {
      const float v = x[j];
      if (best == 0x7fffffff || v > m) {  // strictly larger: the lane keeps its first maximum
        m = v;
        best = j;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(full, m, o);
      const int oi = __shfl_xor_sync(full, best, o);
      argmax_combine(m, best, ov, oi);
    }
    if (!Train) return {0.0f, valid && best == label ? 1 : 0};
    s = 0.0f;
    for (int j = lane; j < C; j += 32) s += expf(x[j] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(full, s, o);
    if (valid) xl = x[label];
    for (int j = lane; j < C; j += 32) d[j] = (expf(x[j] - m) / s - (j == label ? 1.0f : 0.0f)) * inv_r;
  }
  if (!valid) return {NAN, 0};
  return {(logf(s) + m) - xl, best == label ? 1 : 0};
}

// Block b owns rows [b*block_rows, (b+1)*block_rows) of the R listed rows (block_rows is
// rows_per_block, or a multiple of it that keeps the grid within loss_max_blocks); warp w of it
// takes rows w, w+8, ... of that range. Train: writes dLogits, and the block's loss sum and correct
// count to the partials (or, with one block, the final results). !Train: adds the block's correct
// count to *correct_out with an integer atomic (exact, so deterministic). The results go to slot
// *step of loss_out and correct_out (step null: slot 0).
template <bool Small, bool Train>
__global__ void __launch_bounds__(warps_per_block * 32)
    ce_kernel(const float* __restrict__ logits, const std::int32_t* __restrict__ labels,
              const std::int32_t* __restrict__ row_index, std::int64_t R, std::int64_t N, int C, float inv_r,
              std::int64_t block_rows, float* dLogits, float* partial_loss, int* partial_correct, float* loss_out,
              int* correct_out, const std::int32_t* __restrict__ step = nullptr) {
  __shared__ float block_loss[warps_per_block];
  __shared__ int block_correct[warps_per_block];
  const int warp = threadIdx.x / 32;
  const std::int64_t r0 = std::int64_t(blockIdx.x) * block_rows;
  std::int64_t r1 = r0 + block_rows;
  if (r1 > R) r1 = R;
  float loss = 0.0f;
  int correct = 0;
  for (std::int64_t r = r0 + warp; r < r1; r += warps_per_block) {
    const std::int64_t row = row_index != nullptr ? std::int64_t(row_index[r]) : r;
    if (row < 0 || row >= N) {
      loss += NAN;
      continue;
    }
    const row_result res =
        process_row<Small, Train>(logits + row * C, labels[row], C, inv_r, Train ? dLogits + row * C : nullptr);
    loss += res.loss;
    correct += res.correct;
  }
  if ((threadIdx.x & 31) == 0) {
    block_loss[warp] = loss;
    block_correct[warp] = correct;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  const row_result total = sum_in_warp_order(block_loss, block_correct);
  if (!Train) {
    if (total.correct != 0) atomicAdd(correct_out, total.correct);
  } else if (gridDim.x == 1) {
    store_batch_result(total, R, step, loss_out, correct_out);
  } else {
    partial_loss[blockIdx.x] = total.loss;
    partial_correct[blockIdx.x] = total.correct;
  }
}

// The fused loss and bias gradient of one batch of R <= rows_per_block rows, all rows, in one
// block of batch_warps warps: warp w computes rows w, w + batch_warps, ... (two rows each instead of
// ce_kernel's eight, the rows' latencies overlapping), keeping each row's loss and count in shared
// memory. The results are then added up exactly as ce_kernel adds them for one block (8 running
// sums over rows w, w + 8, ..., then those 8 in order), and dBias is summed as
// bias_grad_chunk_kernel sums one chunk (thread (tx, ty) over rows ty, ty + 8, ..., then the 8
// partial sums in order): bit-identical to softmax_cross_entropy followed by bias_grad.
constexpr int batch_warps = 32;

template <bool Small>
__global__ void __launch_bounds__(batch_warps * 32)
    ce_batch_bias_kernel(const float* __restrict__ logits, const std::int32_t* __restrict__ labels, int R, int C,
                         float inv_r, float* dLogits, float* dBias, float* loss_out, int* correct_out,
                         const std::int32_t* __restrict__ step) {
  __shared__ float row_loss[rows_per_block];
  __shared__ int row_correct[rows_per_block];
  __shared__ float block_loss[warps_per_block];
  __shared__ int block_correct[warps_per_block];
  __shared__ float sums[warps_per_block][33];
  const int warp = threadIdx.x / 32;
  for (int r = warp; r < R; r += batch_warps) {
    const row_result res = process_row<Small, true>(logits + std::int64_t(r) * C, labels[r], C, inv_r,
                                                    dLogits + std::int64_t(r) * C);
    if ((threadIdx.x & 31) == 0) {
      row_loss[r] = res.loss;
      row_correct[r] = res.correct;
    }
  }
  __syncthreads();  // the rows' results, and every row of dLogits, visible to the whole block
  if (threadIdx.x < warps_per_block) {
    float loss = 0.0f;
    int correct = 0;
    for (int r = threadIdx.x; r < R; r += warps_per_block) {
      loss += row_loss[r];
      correct += row_correct[r];
    }
    block_loss[threadIdx.x] = loss;
    block_correct[threadIdx.x] = correct;
  }
  constexpr int per_thread = rows_per_block / warps_per_block;  // rows of a column per thread
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
  for (int c0 = 0; c0 < C; c0 += 32) {
    const int col = c0 + tx;
    if (ty < warps_per_block) {
      float v[per_thread];
#pragma unroll
      for (int k = 0; k < per_thread; ++k) {
        const int r = ty + k * warps_per_block;
        v[k] = (col < C && r < R) ? dLogits[std::int64_t(r) * C + col] : 0.0f;
      }
      float acc = 0.0f;
#pragma unroll
      for (int k = 0; k < per_thread; ++k)
        if (ty + k * warps_per_block < R) acc += v[k];
      sums[ty][tx] = acc;
    }
    __syncthreads();
    if (ty == 0 && col < C) {
      float sc = sums[0][tx];
      for (int k = 1; k < warps_per_block; ++k) sc += sums[k][tx];
      dBias[col] = sc;
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  store_batch_result(sum_in_warp_order(block_loss, block_correct), R, step, loss_out, correct_out);
}

constexpr int finish_threads = 256;

// One block: thread t adds partials t, t+256, ... in order, then a fixed shared-memory tree.
__global__ void __launch_bounds__(finish_threads)
    ce_finish_kernel(const float* __restrict__ partial_loss, const int* __restrict__ partial_correct,
                     std::int64_t blocks, std::int64_t R, float* loss_out, int* correct_out,
                     const std::int32_t* __restrict__ step) {
  __shared__ float sl[finish_threads];
  __shared__ int sc[finish_threads];
  float l = 0.0f;
  int c = 0;
  for (std::int64_t b = threadIdx.x; b < blocks; b += finish_threads) {
    l += partial_loss[b];
    c += partial_correct[b];
  }
  sl[threadIdx.x] = l;
  sc[threadIdx.x] = c;
  __syncthreads();
  for (int half = finish_threads / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) {
      sl[threadIdx.x] += sl[threadIdx.x + half];
      sc[threadIdx.x] += sc[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) store_batch_result({sl[0], sc[0]}, R, step, loss_out, correct_out);
}

// The grid of the loss kernels for R rows: blocks of rows_per_block rows, or of a multiple of it
// when that would take more than loss_max_blocks blocks, so that the partials (8 bytes a block) fit
// the bounded scratch of workspace.hpp.
struct loss_grid {
  std::int64_t blocks;
  std::int64_t block_rows;
};
loss_grid grid_for_rows(i64 R) {
  const std::int64_t base = (R + rows_per_block - 1) / rows_per_block;
  const std::int64_t per_block = (base + std::int64_t(loss_max_blocks) - 1) / std::int64_t(loss_max_blocks);
  const std::int64_t block_rows = rows_per_block * (per_block < 1 ? 1 : per_block);
  return {(R + block_rows - 1) / block_rows, block_rows};
}
static_assert(loss_max_blocks * 8 <= scratch_bound_bytes, "loss scratch bound");

}  // namespace

namespace {

// The loss kernels for R listed rows (row_index null: all N rows), results to slot *step (or 0).
void launch_loss(cudaStream_t st, const float* logits, const std::int32_t* labels, const std::int32_t* row_index,
                 i64 R, i64 N, i64 C, float* dLogits, float* loss_out, std::int32_t* correct_out,
                 const std::int32_t* step) {
  const loss_grid grid = grid_for_rows(R);
  const std::int64_t blocks = grid.blocks;
  stream_scratch scratch(blocks > 1 ? std::size_t(blocks) * 8 : 0, st);
  float* pl = scratch.as<float>();
  int* pc = blocks > 1 ? scratch.as<int>(std::size_t(blocks) * 4) : nullptr;
  const float inv_r = 1.0f / static_cast<float>(R);
  const int c = static_cast<int>(C);
  if (C <= 32)
    ce_kernel<true, true><<<unsigned(blocks), warps_per_block * 32, 0, st>>>(
        logits, labels, row_index, R, N, c, inv_r, grid.block_rows, dLogits, pl, pc, loss_out, correct_out, step);
  else
    ce_kernel<false, true><<<unsigned(blocks), warps_per_block * 32, 0, st>>>(
        logits, labels, row_index, R, N, c, inv_r, grid.block_rows, dLogits, pl, pc, loss_out, correct_out, step);
  check_launch("softmaxCrossEntropy launch");
  if (blocks > 1) {
    ce_finish_kernel<<<1, finish_threads, 0, st>>>(pl, pc, blocks, R, loss_out, correct_out, step);
    check_launch("softmaxCrossEntropy finish launch");
  }
}

}  // namespace

void softmax_cross_entropy(stream_handle s, const float* logits, const std::int32_t* labels,
                           const std::int32_t* row_index, i64 R, i64 N, i64 C, float* dLogits, float* loss_out,
                           std::int32_t* correct_out) {
  cudaStream_t st = as_cuda(s);
  if ((row_index != nullptr || R == 0) && N > 0 && C > 0)
    detail::check_cuda(cudaMemsetAsync(dLogits, 0, std::size_t(N) * std::size_t(C) * sizeof(float), st),
                       "softmaxCrossEntropy (zero dLogits)");
  if (R == 0) {
    detail::check_cuda(cudaMemsetAsync(loss_out, 0, sizeof(float), st), "softmaxCrossEntropy (loss)");
    detail::check_cuda(cudaMemsetAsync(correct_out, 0, sizeof(std::int32_t), st), "softmaxCrossEntropy (correct)");
    return;
  }
  launch_loss(st, logits, labels, row_index, R, N, C, dLogits, loss_out, correct_out, nullptr);
}

void softmax_cross_entropy_bias_grad(stream_handle s, const float* logits, const std::int32_t* labels, i64 N, i64 C,
                                     float* dLogits, float* dBias, float* loss_out, std::int32_t* correct_out,
                                     const std::int32_t* step) {
  cudaStream_t st = as_cuda(s);
  if (N > rows_per_block) {  // several blocks: the loss kernels, then biasGrad itself
    launch_loss(st, logits, labels, nullptr, N, N, C, dLogits, loss_out, correct_out, step);
    bias_grad(s, dLogits, nullptr, dBias, N, C, false);
    return;
  }
  const float inv_r = 1.0f / static_cast<float>(N);
  const int r = static_cast<int>(N), c = static_cast<int>(C);
  if (C <= 32)
    ce_batch_bias_kernel<true><<<1, batch_warps * 32, 0, st>>>(logits, labels, r, c, inv_r, dLogits, dBias, loss_out,
                                                              correct_out, step);
  else
    ce_batch_bias_kernel<false><<<1, batch_warps * 32, 0, st>>>(logits, labels, r, c, inv_r, dLogits, dBias, loss_out,
                                                               correct_out, step);
  check_launch("softmaxCrossEntropyBiasGrad launch");
}

void accuracy(stream_handle s, const float* logits, const std::int32_t* labels, const std::int32_t* row_index, i64 R,
              i64 N, i64 C, std::int32_t* correct_out) {
  cudaStream_t st = as_cuda(s);
  detail::check_cuda(cudaMemsetAsync(correct_out, 0, sizeof(std::int32_t), st), "accuracy (zero count)");
  if (R == 0) return;
  const loss_grid grid = grid_for_rows(R);
  const std::int64_t blocks = grid.blocks;
  const int c = static_cast<int>(C);
  if (C <= 32)
    ce_kernel<true, false><<<unsigned(blocks), warps_per_block * 32, 0, st>>>(
        logits, labels, row_index, R, N, c, 0.0f, grid.block_rows, nullptr, nullptr, nullptr, nullptr, correct_out);
  else
    ce_kernel<false, false><<<unsigned(blocks), warps_per_block * 32, 0, st>>>(
        logits, labels, row_index, R, N, c, 0.0f, grid.block_rows, nullptr, nullptr, nullptr, nullptr, correct_out);
  check_launch("accuracy launch");
}

}  // namespace gpumem::ops::gpu
