// cuBLAS, loaded at run time (dlopen) rather than linked: the build needs no cuBLAS headers or
// libraries, and the addon still loads where cuBLAS is missing (the GPU gemm then uses the tiled
// kernel). Declares the few types and functions that gemm and gemm_strided_batched need, with cuBLAS's own ABI.
#pragma once
#ifdef GPUMEM_WITH_CUDA
#include <cuda_runtime_api.h>

#include <string>

namespace gpumem::ops::cublas {

enum operation : int { op_n = 0, op_t = 1 };  // cublasOperation_t: CUBLAS_OP_N, CUBLAS_OP_T

struct load_status {
  bool loaded = false;
  std::string library;  // the soname that loaded
  std::string error;    // why none did
};

// Loads the library and its symbols, once (thread-safe); later calls return the same status.
const load_status& load();

// Column-major sgemm, as cublasSgemm_v2, on `stream`'s device with that device's handle (created
// at first use). The workspace is the one bound to the stream (workspace.hpp), or else one
// allocated for the stream on its first use (counted as an unbound allocation). Throws cuda_error
// for a cuBLAS failure, invalid_state if cuBLAS did not load.
void sgemm(cudaStream_t stream, operation transa, operation transb, int m, int n, int k, float alpha, const float* A,
           int lda, const float* B, int ldb, float beta, float* C, int ldc);

// The same product for `batch` matrices at once, as cublasSgemmStridedBatched: A_i = A + i * stride_a
// (elements), likewise B_i and C_i. Throws invalid_state when the library lacks the symbol
// (has_sgemm_strided_batched() says so beforehand).
void sgemm_strided_batched(cudaStream_t stream, operation transa, operation transb, int m, int n, int k, float alpha,
                           const float* A, int lda, long long stride_a, const float* B, int ldb, long long stride_b,
                           float beta, float* C, int ldc, long long stride_c, int batch);
bool has_sgemm_strided_batched();

// Makes every handle whose stream is `stream` let go of its workspace (the next sgemm sets the
// stream and a workspace again): called when the stream's bound workspace is unbound.
void forget_stream(cudaStream_t stream);

}  // namespace gpumem::ops::cublas
#endif
