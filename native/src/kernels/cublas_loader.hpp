// cuBLAS, loaded at run time (dlopen) rather than linked: the build needs no cuBLAS headers or
// libraries, and the addon still loads where cuBLAS is missing (the GPU gemm then uses the tiled
// kernel). Declares the few types and functions that gemm needs, with cuBLAS's own ABI.
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
// at first use). Throws cuda_error for a cuBLAS failure, invalid_state if cuBLAS did not load.
void sgemm(cudaStream_t stream, operation transa, operation transb, int m, int n, int k, float alpha, const float* A,
           int lda, const float* B, int ldb, float beta, float* C, int ldc);

}  // namespace gpumem::ops::cublas
#endif
