// Matrix products (one, and strided-batched): argument checks, dispatch to the GPU, and the CPU reference.
//
// The CPU path packs op(A) as [M,K] and op(B) as [K,N] row-major (copies only where transposed),
// then runs an i-k-j product blocked over N and K (a 256x256 panel of B stays in cache) with four
// rows of C at a time sharing each load of B; the inner loop is contiguous, so -O3 vectorises it.
// Sums are in float, in k order, like a GPU's (the result differs from cuBLAS by rounding only).
#include <algorithm>
#include <string>
#include <vector>

#include "gpumem/errors.hpp"
#include "ops.hpp"

namespace gpumem::ops {
namespace {

constexpr i64 nb = 256, kb = 256;

// dst[c*rows + r] = src[r*cols + c]: a blocked transpose of a [rows, cols] matrix.
void transpose(const float* src, float* dst, i64 rows, i64 cols) {
  constexpr i64 t = 32;
  for (i64 r0 = 0; r0 < rows; r0 += t)
    for (i64 c0 = 0; c0 < cols; c0 += t) {
      const i64 r1 = std::min(rows, r0 + t), c1 = std::min(cols, c0 + t);
      for (i64 r = r0; r < r1; ++r)
        for (i64 c = c0; c < c1; ++c) dst[c * rows + r] = src[r * cols + c];
    }
}

// C[i0..i0+4) rows, columns [j0, j1), k in [k0, k1): C += alpha * A * B.
void block4(const float* A, const float* B, float* C, i64 N, i64 K, i64 i0, i64 j0, i64 j1, i64 k0, i64 k1,
            float alpha) {
  float* __restrict__ c0 = C + (i0 + 0) * N;
  float* __restrict__ c1 = C + (i0 + 1) * N;
  float* __restrict__ c2 = C + (i0 + 2) * N;
  float* __restrict__ c3 = C + (i0 + 3) * N;
  for (i64 k = k0; k < k1; ++k) {
    const float a0 = alpha * A[(i0 + 0) * K + k], a1 = alpha * A[(i0 + 1) * K + k];
    const float a2 = alpha * A[(i0 + 2) * K + k], a3 = alpha * A[(i0 + 3) * K + k];
    const float* __restrict__ b = B + k * N;
    for (i64 j = j0; j < j1; ++j) {
      const float bj = b[j];
      c0[j] += a0 * bj;
      c1[j] += a1 * bj;
      c2[j] += a2 * bj;
      c3[j] += a3 * bj;
    }
  }
}

void block1(const float* A, const float* B, float* C, i64 N, i64 K, i64 i, i64 j0, i64 j1, i64 k0, i64 k1,
            float alpha) {
  float* __restrict__ c = C + i * N;
  for (i64 k = k0; k < k1; ++k) {
    const float a = alpha * A[i * K + k];
    const float* __restrict__ b = B + k * N;
    for (i64 j = j0; j < j1; ++j) c[j] += a * b[j];
  }
}

void gemm_cpu(bool ta, bool tb, i64 M, i64 N, i64 K, float alpha, const float* A, const float* B, float beta,
              float* C) {
  const i64 mn = M * N;
  if (beta == 0.0f) std::fill(C, C + mn, 0.0f);
  else if (beta != 1.0f)
    for (i64 i = 0; i < mn; ++i) C[i] *= beta;
  if (K == 0 || alpha == 0.0f) return;
  std::vector<float> a_packed, b_packed;
  if (ta) {  // A stored [K, M]
    a_packed.resize(static_cast<std::size_t>(M * K));
    transpose(A, a_packed.data(), K, M);
    A = a_packed.data();
  }
  if (tb) {  // B stored [N, K]
    b_packed.resize(static_cast<std::size_t>(K * N));
    transpose(B, b_packed.data(), N, K);
    B = b_packed.data();
  }
  for (i64 j0 = 0; j0 < N; j0 += nb) {
    const i64 j1 = std::min(N, j0 + nb);
    for (i64 k0 = 0; k0 < K; k0 += kb) {
      const i64 k1 = std::min(K, k0 + kb);
      i64 i = 0;
      for (; i + 4 <= M; i += 4) block4(A, B, C, N, K, i, j0, j1, k0, k1, alpha);
      for (; i < M; ++i) block1(A, B, C, N, K, i, j0, j1, k0, k1, alpha);
    }
  }
}

// One product of the batch: op(A) and op(B) packed contiguous from their leading dimensions, the
// blocked product into `product`, then C = product + beta * C over C's leading dimension.
void gemm_strided_one(bool ta, bool tb, i64 M, i64 N, i64 K, float alpha, const float* A, i64 lda, const float* B,
                      i64 ldb, float beta, float* C, i64 ldc, std::vector<float>& a_packed,
                      std::vector<float>& b_packed, std::vector<float>& product) {
  if (alpha == 0.0f) {  // A and B are not read
    std::fill(product.begin(), product.end(), 0.0f);
  } else {
    for (i64 m = 0; m < M; ++m)
      for (i64 k = 0; k < K; ++k) a_packed[m * K + k] = ta ? A[k * lda + m] : A[m * lda + k];
    for (i64 k = 0; k < K; ++k)
      for (i64 n = 0; n < N; ++n) b_packed[k * N + n] = tb ? B[n * ldb + k] : B[k * ldb + n];
    gemm_cpu(false, false, M, N, K, alpha, a_packed.data(), b_packed.data(), 0.0f, product.data());
  }
  for (i64 m = 0; m < M; ++m) {
    float* c = C + m * ldc;
    const float* p = product.data() + m * N;
    for (i64 n = 0; n < N; ++n) c[n] = beta == 0.0f ? p[n] : p[n] + beta * c[n];  // beta 0: C is not read
  }
}

// cuBLAS takes a product's sizes as int.
void check_gpu_sizes(i64 M, i64 N, i64 K) {
  check::fits_i32(M, "M");
  check::fits_i32(N, "N");
  check::fits_i32(K, "K");
}

}  // namespace

void gemm_strided_batched(bool on_device, stream_handle stream, bool trans_a, bool trans_b, i64 M, i64 N, i64 K,
                          float alpha, const float* A, i64 lda, i64 stride_a, const float* B, i64 ldb, i64 stride_b,
                          float beta, float* C, i64 ldc, i64 stride_c, i64 batch) {
  check::at_least(M, 1, "M");
  check::at_least(N, 1, "N");
  check::at_least(K, 1, "K");
  check::at_least(batch, 1, "batch");
  check::at_least(lda, trans_a ? M : K, "lda");
  check::at_least(ldb, trans_b ? K : N, "ldb");
  check::at_least(ldc, N, "ldc");
  check::non_negative(stride_a, "strideA");
  check::non_negative(stride_b, "strideB");
  check::non_negative(stride_c, "strideC");
  if (batch > 1) {
    const bool apart = stride_c >= (M - 1) * ldc + N;
    const bool interleaved = stride_c >= N && (batch - 1) * stride_c + N <= ldc;
    if (!apart && !interleaved)
      check::fail_range("strideC",
                        "a stride that keeps the C matrices apart (>= (M-1)*ldc + N = " +
                            std::to_string((M - 1) * ldc + N) + ", or rows interleaved: >= N with (batch-1)*strideC + N <= ldc)",
                        std::to_string(stride_c));
  }
  check::not_null({{A, "A"}, {B, "B"}, {C, "C"}});
  if (on_device) {
    check_gpu_sizes(M, N, K);
    check::fits_i32(lda, "lda");
    check::fits_i32(ldb, "ldb");
    check::fits_i32(ldc, "ldc");
    check::fits_i32(batch, "batch");
  }
  GPUMEM_OPS_ON_DEVICE(gemm_strided_batched(stream, trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb,
                                            stride_b, beta, C, ldc, stride_c, batch));
  std::vector<float> a_packed(static_cast<std::size_t>(M * K)), b_packed(static_cast<std::size_t>(K * N));
  std::vector<float> product(static_cast<std::size_t>(M * N));
  for (i64 i = 0; i < batch; ++i)
    gemm_strided_one(trans_a, trans_b, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta,
                     C + i * stride_c, ldc, a_packed, b_packed, product);
}

void gemm(bool on_device, stream_handle stream, bool trans_a, bool trans_b, i64 M, i64 N, i64 K, float alpha,
          const float* A, const float* B, float beta, float* C) {
  check::non_negative(M, "M");
  check::non_negative(N, "N");
  check::non_negative(K, "K");
  if (M == 0 || N == 0) return;
  check::not_null(C, "C");
  if (K > 0) check::not_null({{A, "A"}, {B, "B"}});
  if (on_device) check_gpu_sizes(M, N, K);
  GPUMEM_OPS_ON_DEVICE(gemm(stream, trans_a, trans_b, M, N, K, alpha, A, B, beta, C));
  gemm_cpu(trans_a, trans_b, M, N, K, alpha, A, B, beta, C);
}

gemm_backend_info gemm_backend() {
#ifdef GPUMEM_WITH_CUDA
  return gpu::gemm_backend();
#else
  return {"tiled", "built without CUDA: there is no GPU path (the CPU reference is used with onDevice=false)"};
#endif
}

}  // namespace gpumem::ops
