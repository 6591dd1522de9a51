// The trainer's native operations (packages/gnn/src/framework/native-ops.ts is the contract): one function
// per op, plain C++ types, `on_device` choosing the CUDA kernel (queued on `stream`, never
// synchronising the host) or the CPU reference (run synchronously on the calling thread).
//
// Every function checks what it can cheaply (sizes non-negative, p in [0,1), mode 0..2, pointers
// non-null where something is to be read or written) and throws gpumem::invalid_argument naming
// the argument; CUDA failures throw gpumem::cuda_error; on_device in a build without CUDA throws
// gpumem::invalid_state("built without CUDA"). Pointers are trusted otherwise: host memory for the
// CPU path, device (or managed) memory for the GPU path.
//
// Layout: row-major f32 matrices, i32 indices, u8 dropout masks. Sizes are int64 (JS numbers).
// Random numbers come from a counter-based generator (rng.hpp): value i of a call is a pure
// function of (seed, offset + i), identical on the CPU and the GPU, bit for bit.
//
// Determinism: every float reduction (biasGrad, softmaxCrossEntropy's loss, spmm's row sums, gemm,
// the softmaxes, layer norm and its backward, the dWpe sums) gives bit-identical results run after
// run on the same device; scatter_add_rows and embedding_backward's dWte use float atomics on the
// GPU and are the exceptions. CPU and GPU results agree to rounding (the GPU
// fuses multiply-adds and sums in another order), except where documented as identical: the
// random generators, dropout masks, fill, csr_build, row_degrees and edge_norm.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "gpumem/stream.hpp"
#include "op_args.hpp"

namespace gpumem::ops {

using i64 = std::int64_t;

// C[M,N] = alpha * op(A) @ op(B) + beta * C (beta == 0: C is not read, as in BLAS).
void gemm(bool on_device, stream_handle stream, bool trans_a, bool trans_b, i64 M, i64 N, i64 K, float alpha,
          const float* A, const float* B, float beta, float* C);
struct gemm_backend_info {
  std::string backend;  // "cublas" or "tiled"
  std::string reason;
};
gemm_backend_info gemm_backend();

// The CUDA architectures the kernels were built for, as CMake's list ("80-real 86-real ... 120":
// "-real" is machine code only, a bare number adds its PTX); "" in a build without CUDA.
std::string built_cuda_architectures();
// The CUDA runtime the kernels are linked with (e.g. 13000); 0 in a build without CUDA. gpumem_core
// calls the driver only: the kernels are what need a driver of this runtime's major release.
int runtime_version() noexcept;
struct kernel_image_info {
  bool runnable = false;  // the device has an image of the kernels it can run (machine code or PTX)
  int binary_version = 0; // the machine code's architecture, e.g. 90; with PTX only, the JIT target
  int ptx_version = 0;    // the PTX's architecture; 0 when none was embedded for it
  std::string error;      // why not, when not runnable (e.g. cudaErrorNoKernelImageForDevice)
};
// Asks the runtime for a kernel's image on `device` (cudaFuncGetAttributes); never throws.
kernel_image_info kernel_image(int device);

// Y[rows,cols] += bias[cols].
void add_bias(bool on_device, stream_handle stream, float* Y, const float* bias, i64 rows, i64 cols);
// dBias[cols] = (accumulate ? dBias : 0) + column sums of dY[rows,cols].
void bias_grad(bool on_device, stream_handle stream, const float* dY, float* dBias, i64 rows, i64 cols,
               bool accumulate);
// Y = max(Y + bias, 0) per row: the bias add fused with the ReLU after it.
void add_bias_relu(bool on_device, stream_handle stream, float* Y, const float* bias, i64 rows, i64 cols);
// dY = dY where Y > 0, else 0 (in place; Y is the ReLU's output), then dBias = column sums of it:
// ReLU's backward fused with the bias gradient of the layer before it.
void relu_bias_grad(bool on_device, stream_handle stream, const float* Y, float* dY, float* dBias, i64 rows, i64 cols);

void relu(bool on_device, stream_handle stream, const float* X, float* Y, i64 n);
void relu_backward(bool on_device, stream_handle stream, const float* Y, const float* dY, float* dX, i64 n);
void dropout(bool on_device, stream_handle stream, const float* X, float* Y, std::uint8_t* mask, i64 n, double p,
             std::uint64_t seed, std::uint64_t offset);
void dropout_backward(bool on_device, stream_handle stream, const float* dY, const std::uint8_t* mask, float* dX,
                      i64 n, double p);

// row_index null: all rows (then R must equal N). Rows of row_index outside [0,N) and labels
// outside [0,C) make the loss NaN (and count as wrong); they are never written through.
// R == 0: loss 0, no correct rows, dLogits all zero.
void softmax_cross_entropy(bool on_device, stream_handle stream, const float* logits, const std::int32_t* labels,
                           const std::int32_t* row_index, i64 R, i64 N, i64 C, float* dLogits, float* loss_out,
                           std::int32_t* correct_out);
void accuracy(bool on_device, stream_handle stream, const float* logits, const std::int32_t* labels,
              const std::int32_t* row_index, i64 R, i64 N, i64 C, std::int32_t* correct_out);
// softmax_cross_entropy over all N rows (N >= 1), then dBias[C] = column sums of dLogits: the
// loss fused with the bias gradient of the layer that made the logits, bit-identical to the two
// ops one after the other. step: null, or an i32 (device memory on the GPU) naming the slot of
// loss_out[] and correct_out[] that receives this call's results.
void softmax_cross_entropy_bias_grad(bool on_device, stream_handle stream, const float* logits,
                                     const std::int32_t* labels, i64 N, i64 C, float* dLogits, float* dBias,
                                     float* loss_out, std::int32_t* correct_out, const std::int32_t* step);

void sgd(bool on_device, stream_handle stream, float* W, const float* G, i64 n, float lr);
void adam(bool on_device, stream_handle stream, float* W, const float* G, float* M, float* V, i64 n, float lr,
          float beta1, float beta2, float eps, i64 step);

void gather_rows(bool on_device, stream_handle stream, const float* X, const std::int32_t* index, float* out, i64 E,
                 i64 H);
// A training batch in one pass: for r < rows, with i = index[(step ? *step : 0) * rows + r],
// x_out[r,:] = X[i,:] (H columns) and y_out[r] = labels[i]. step: null or an i32 step counter
// (device memory on the GPU), so that a captured step reads the batch of the current step.
void gather_batch(bool on_device, stream_handle stream, const float* X, const std::int32_t* labels,
                  const std::int32_t* index, const std::int32_t* step, i64 rows, i64 H, float* x_out,
                  std::int32_t* y_out);
void scatter_add_rows(bool on_device, stream_handle stream, const float* src, const std::int32_t* index, float* out,
                      i64 E, i64 H);
void spmm(bool on_device, stream_handle stream, const std::int32_t* rowptr, const std::int32_t* col, const float* val,
          const float* X, float* out, i64 N, i64 H);
// spmm with X stored as bf16 (each value the upper 16 bits of a float), summed in f32 in the same order.
void spmm_bf16(bool on_device, stream_handle stream, const std::int32_t* rowptr, const std::int32_t* col,
               const float* val, const std::uint16_t* X, float* out, i64 N, i64 H);
// Y = X rounded to bf16 (nearest even).
void f32_to_bf16(bool on_device, stream_handle stream, const float* X, std::uint16_t* Y, i64 n);
std::size_t csr_build_temp_bytes(bool on_device, i64 E, i64 N);
void csr_build(bool on_device, stream_handle stream, const std::int32_t* rows, const std::int32_t* cols, i64 E, i64 N,
               std::int32_t* rowptr, std::int32_t* col_out, void* temp, std::size_t temp_bytes);
void row_degrees(bool on_device, stream_handle stream, const std::int32_t* rowptr, i64 N, float* deg);
void edge_norm(bool on_device, stream_handle stream, const std::int32_t* rowptr, const std::int32_t* col, i64 N,
               const float* deg, int mode, float* val);
// w[e] for an edge list src -> dst: as edge_norm with deg[dst] as the row's degree and deg[src] as the column's.
void edge_norm_list(bool on_device, stream_handle stream, const std::int32_t* src, const std::int32_t* dst,
                    const float* deg, i64 E, int mode, float* w);
// out[e,:] = X[e,:] * w[e] (per-edge message weights); out may be X.
void scale_rows(bool on_device, stream_handle stream, const float* X, const float* w, float* out, i64 E, i64 H);

// modulo in [1, 2^31]: out[i] = bits(seed, offset + i) mod modulo, from 64 random bits (the bias,
// at most modulo / 2^64, is negligible).
void random_ints(bool on_device, stream_handle stream, std::int32_t* out, i64 n, i64 modulo, std::uint64_t seed,
                 std::uint64_t offset);
void random_normal(bool on_device, stream_handle stream, float* out, i64 n, std::uint64_t seed, std::uint64_t offset);
void random_uniform(bool on_device, stream_handle stream, float* out, i64 n, float low, float high, std::uint64_t seed,
                    std::uint64_t offset);

void fill_f32(bool on_device, stream_handle stream, float* ptr, i64 n, float value);
void fill_i32(bool on_device, stream_handle stream, std::int32_t* ptr, i64 n, std::int32_t value);
// *ptr += value (one i32), in stream order: advances a device-side step counter.
void add_i32(bool on_device, stream_handle stream, std::int32_t* ptr, std::int32_t value);
// Work queued on `waiter` after this call waits for the work queued on `signaller` before it (an
// event recorded on signaller, waited on by waiter). Inside a CUDA Graph capture this forks the
// capture onto waiter or joins it back. On the CPU path (synchronous ops) there is nothing to order.
void stream_wait(bool on_device, stream_handle waiter, stream_handle signaller);
void scale(bool on_device, stream_handle stream, float alpha, const float* X, float* Y, i64 n);
// Y += alpha * X (n values), each Y[i] = fmaf(alpha, X[i], Y[i]) on both paths.
void axpy(bool on_device, stream_handle stream, float alpha, const float* X, float* Y, i64 n);

// ---------------------------------------------------------------------------------------------
// Transformer ops (attention.cu, norm.cu, embedding.cu; the batched product in gemm.cu). Every size
// below must be >= 1 (invalid_argument otherwise).

// For i in [0, batch): C_i[M,N] = alpha * op(A_i) @ op(B_i) + beta * C_i, A_i = A + i * stride_a (elements),
// likewise B_i and C_i. Row-major with leading dimensions (elements per stored row): A_i is stored
// [M, lda] ([K, lda] when trans_a), B_i [K, ldb] ([N, ldb] when trans_b), C_i [M, ldc]. beta == 0: C is
// not read. Strides may be 0 for A and B (one matrix for every i); the C_i must not overlap: either
// whole matrices apart (stride_c >= (M-1)*ldc + N) or interleaved rows (stride_c >= N and
// (batch-1)*stride_c + N <= ldc).
void gemm_strided_batched(bool on_device, stream_handle stream, bool trans_a, bool trans_b, i64 M, i64 N, i64 K,
                          float alpha, const float* A, i64 lda, i64 stride_a, const float* B, i64 ldb, i64 stride_b,
                          float beta, float* C, i64 ldc, i64 stride_c, i64 batch);
// Y[b,h,t,d] = X[(b*T + t) * ldx + h*D + d], Y contiguous [B,H,T,D], ldx >= H*D. Y must not overlap X.
void heads_to_batch(bool on_device, stream_handle stream, const float* X, i64 ldx, float* Y, i64 B, i64 T, i64 H,
                    i64 D);
// X[(b*T + t) * ldx + h*D + d] = Y[b,h,t,d]; writes only those elements of X.
void batch_to_heads(bool on_device, stream_handle stream, const float* Y, float* X, i64 ldx, i64 B, i64 T, i64 H,
                    i64 D);
// S, P: [rows*T, T], `rows` TxT matrices. P[i,j] = softmax over j <= i of scale * S[i,j] (max
// subtracted), 0 for j > i. P may be S.
void causal_softmax(bool on_device, stream_handle stream, const float* S, float* P, i64 rows, i64 T, float scale);
// dS[i,j] = scale * P[i,j] * (dP[i,j] - sum_{k<=i} P[i,k] dP[i,k]) for j <= i, 0 for j > i. dS may be dP.
void causal_softmax_backward(bool on_device, stream_handle stream, const float* P, const float* dP, float* dS, i64 rows,
                             i64 T, float scale);
// Per row of X[rows, cols]: mean, rstd = 1/sqrt(biased variance + eps), Y = (X - mean) * rstd * gamma + beta;
// mean and rstd f32[rows]. Y may be X.
void layer_norm(bool on_device, stream_handle stream, const float* X, const float* gamma, const float* beta, float* Y,
                float* mean, float* rstd, i64 rows, i64 cols, float eps);
// dX = rstd * (dY*gamma - mean_c(dY*gamma) - xhat * mean_c(dY*gamma*xhat)) (overwritten; dX may be dY),
// dGamma[c] = (accumulate ? dGamma[c] : 0) + sum_r dY*xhat, dBeta[c] likewise + sum_r dY, with xhat =
// (X - mean) * rstd. Deterministic: fixed chunks of rows summed in a fixed order, no atomics.
void layer_norm_backward(bool on_device, stream_handle stream, const float* dY, const float* X, const float* gamma,
                         const float* mean, const float* rstd, float* dX, float* dGamma, float* dBeta, i64 rows,
                         i64 cols, bool accumulate);
// GELU, tanh approximation: Y = 0.5 X (1 + tanh(sqrt(2/pi) (X + 0.044715 X^3))). Y may be X.
void gelu(bool on_device, stream_handle stream, const float* X, float* Y, i64 n);
// dX = dY * GELU'(X); dX may be dY.
void gelu_backward(bool on_device, stream_handle stream, const float* X, const float* dY, float* dX, i64 n);
// out[b*T + t, :] = wte[tokens[b*T + t], :] + wpe[t, :]; tokens i32[B*T], wte [V, C], wpe [>= T, C]. Ids are
// not checked against V (not passed; the caller checks them): the CPU reference throws invalid_argument
// for a negative id before writing anything, the GPU kernel leaves out the wte term of a negative id.
void embedding(bool on_device, stream_handle stream, const std::int32_t* tokens, const float* wte, const float* wpe,
               float* out, i64 B, i64 T, i64 C);
// dWte[tokens[r], :] += dOut[r, :] (float atomics on the GPU, as scatter_add_rows; a negative id: CPU
// throws before writing, GPU skips), dWpe[t, :] += sum over b in order of dOut[b*T + t, :] (deterministic).
void embedding_backward(bool on_device, stream_handle stream, const float* dOut, const std::int32_t* tokens,
                        float* dWte, float* dWpe, i64 B, i64 T, i64 C);

// ---------------------------------------------------------------------------------------------
// Internal: the GPU launchers (defined in the .cu files, only with CUDA), called by the checked
// entry points above after validation. Same arguments, no checks.
namespace gpu {
void gemm(stream_handle s, bool ta, bool tb, i64 M, i64 N, i64 K, float alpha, const float* A, const float* B,
          float beta, float* C);
gemm_backend_info gemm_backend();
void add_bias(stream_handle s, float* Y, const float* bias, i64 rows, i64 cols, bool relu);
// relu_out: when not null, dY is masked by relu_out > 0 in place before it is summed.
void bias_grad(stream_handle s, float* dY, const float* relu_out, float* dBias, i64 rows, i64 cols, bool accumulate);
void relu(stream_handle s, const float* X, float* Y, i64 n);
void relu_backward(stream_handle s, const float* Y, const float* dY, float* dX, i64 n);
void dropout(stream_handle s, const float* X, float* Y, std::uint8_t* mask, i64 n, double p, float scale,
             std::uint64_t seed, std::uint64_t offset);
void dropout_backward(stream_handle s, const float* dY, const std::uint8_t* mask, float* dX, i64 n, float scale);
void softmax_cross_entropy(stream_handle s, const float* logits, const std::int32_t* labels,
                           const std::int32_t* row_index, i64 R, i64 N, i64 C, float* dLogits, float* loss_out,
                           std::int32_t* correct_out);
void accuracy(stream_handle s, const float* logits, const std::int32_t* labels, const std::int32_t* row_index, i64 R,
              i64 N, i64 C, std::int32_t* correct_out);
void softmax_cross_entropy_bias_grad(stream_handle s, const float* logits, const std::int32_t* labels, i64 N, i64 C,
                                     float* dLogits, float* dBias, float* loss_out, std::int32_t* correct_out,
                                     const std::int32_t* step);
void sgd(stream_handle s, float* W, const float* G, i64 n, float lr);
void adam(stream_handle s, float* W, const float* G, float* M, float* V, i64 n, float lr, float beta1, float beta2,
          float eps, float step_size, float inv_sqrt_bc2);
void gather_rows(stream_handle s, const float* X, const std::int32_t* index, float* out, i64 E, i64 H);
void gather_batch(stream_handle s, const float* X, const std::int32_t* labels, const std::int32_t* index,
                  const std::int32_t* step, i64 rows, i64 H, float* x_out, std::int32_t* y_out);
void scatter_add_rows(stream_handle s, const float* src, const std::int32_t* index, float* out, i64 E, i64 H);
void spmm(stream_handle s, const std::int32_t* rowptr, const std::int32_t* col, const float* val, const float* X,
          float* out, i64 N, i64 H);
void spmm_bf16(stream_handle s, const std::int32_t* rowptr, const std::int32_t* col, const float* val,
               const std::uint16_t* X, float* out, i64 N, i64 H);
void f32_to_bf16(stream_handle s, const float* X, std::uint16_t* Y, i64 n);
std::size_t csr_build_temp_bytes(i64 E, i64 N);
void csr_build(stream_handle s, const std::int32_t* rows, const std::int32_t* cols, i64 E, i64 N,
               std::int32_t* rowptr, std::int32_t* col_out, void* temp, std::size_t temp_bytes);
void row_degrees(stream_handle s, const std::int32_t* rowptr, i64 N, float* deg);
void edge_norm(stream_handle s, const std::int32_t* rowptr, const std::int32_t* col, i64 N, const float* deg, int mode,
               float* val);
void edge_norm_list(stream_handle s, const std::int32_t* src, const std::int32_t* dst, const float* deg, i64 E,
                    int mode, float* w);
void scale_rows(stream_handle s, const float* X, const float* w, float* out, i64 E, i64 H);
void random_ints(stream_handle s, std::int32_t* out, i64 n, std::uint32_t modulo, std::uint64_t seed,
                 std::uint64_t offset);
void random_normal(stream_handle s, float* out, i64 n, std::uint64_t seed, std::uint64_t offset);
void random_uniform(stream_handle s, float* out, i64 n, float low, float high, std::uint64_t seed,
                    std::uint64_t offset);
void fill_f32(stream_handle s, float* ptr, i64 n, float value);
void fill_i32(stream_handle s, std::int32_t* ptr, i64 n, std::int32_t value);
void add_i32(stream_handle s, std::int32_t* ptr, std::int32_t value);
void stream_wait(stream_handle waiter, stream_handle signaller);
void scale(stream_handle s, float alpha, const float* X, float* Y, i64 n);
void axpy(stream_handle s, float alpha, const float* X, float* Y, i64 n);
void gemm_strided_batched(stream_handle s, bool ta, bool tb, i64 M, i64 N, i64 K, float alpha, const float* A,
                          i64 lda, i64 stride_a, const float* B, i64 ldb, i64 stride_b, float beta, float* C, i64 ldc,
                          i64 stride_c, i64 batch);
void heads_to_batch(stream_handle s, const float* X, i64 ldx, float* Y, i64 B, i64 T, i64 H, i64 D);
void batch_to_heads(stream_handle s, const float* Y, float* X, i64 ldx, i64 B, i64 T, i64 H, i64 D);
void causal_softmax(stream_handle s, const float* S, float* P, i64 rows, i64 T, float scale);
void causal_softmax_backward(stream_handle s, const float* P, const float* dP, float* dS, i64 rows, i64 T, float scale);
void layer_norm(stream_handle s, const float* X, const float* gamma, const float* beta, float* Y, float* mean,
                float* rstd, i64 rows, i64 cols, float eps);
void layer_norm_backward(stream_handle s, const float* dY, const float* X, const float* gamma, const float* mean,
                         const float* rstd, float* dX, float* dGamma, float* dBeta, i64 rows, i64 cols,
                         bool accumulate);
void gelu(stream_handle s, const float* X, float* Y, i64 n);
void gelu_backward(stream_handle s, const float* X, const float* dY, float* dX, i64 n);
void embedding(stream_handle s, const std::int32_t* tokens, const float* wte, const float* wpe, float* out, i64 B,
               i64 T, i64 C);
void embedding_backward(stream_handle s, const float* dOut, const std::int32_t* tokens, float* dWte, float* dWpe,
                        i64 B, i64 T, i64 C);
}  // namespace gpu

}  // namespace gpumem::ops

// In the CPU entry points, after validation: run the GPU launcher when on_device (and return),
// or throw invalid_state in a build without CUDA.
#ifdef GPUMEM_WITH_CUDA
#define GPUMEM_OPS_ON_DEVICE(call) \
  do {                             \
    if (on_device) {               \
      ::gpumem::ops::gpu::call;    \
      return;                      \
    }                              \
  } while (0)
#else
#define GPUMEM_OPS_ON_DEVICE(call)                      \
  do {                                                  \
    (void)stream;                                       \
    if (on_device) ::gpumem::ops::check::no_cuda();     \
  } while (0)
#endif
