// Elementwise ops, optimisers and random generators on the GPU: grid-stride loops, one launch each.
#include "kernel_common.cuh"
#include "rng.hpp"

namespace gpumem::ops::gpu {
namespace {

__global__ void relu_kernel(const float* __restrict__ X, float* Y, std::uint64_t n) {
  GPUMEM_GRID_STRIDE(i, n) {
    const float x = X[i];
    Y[i] = x > 0.0f ? x : 0.0f;
  }
}

__global__ void relu_backward_kernel(const float* __restrict__ Y, const float* dY, float* dX, std::uint64_t n) {
  GPUMEM_GRID_STRIDE(i, n) dX[i] = Y[i] > 0.0f ? dY[i] : 0.0f;
}

__global__ void dropout_kernel(const float* __restrict__ X, float* Y, std::uint8_t* __restrict__ mask,
                               std::uint64_t n, double p, float s, std::uint64_t key, std::uint64_t offset) {
  GPUMEM_GRID_STRIDE(i, n) {
    const bool keep = rng::uniform24(rng::bits(key, offset + i)) >= p;
    mask[i] = keep ? 1 : 0;
    Y[i] = keep ? X[i] * s : 0.0f;
  }
}

__global__ void dropout_backward_kernel(const float* dY, const std::uint8_t* __restrict__ mask, float* dX,
                                        std::uint64_t n, float s) {
  GPUMEM_GRID_STRIDE(i, n) dX[i] = mask[i] ? dY[i] * s : 0.0f;
}

__global__ void sgd_kernel(float* W, const float* __restrict__ G, std::uint64_t n, float lr) {
  GPUMEM_GRID_STRIDE(i, n) W[i] -= lr * G[i];
}

__global__ void adam_kernel(float* __restrict__ W, const float* __restrict__ G, float* __restrict__ M,
                            float* __restrict__ V, std::uint64_t n, float beta1, float beta2, float eps,
                            float step_size, float inv_sqrt_bc2) {
  const float one_b1 = 1.0f - beta1, one_b2 = 1.0f - beta2;
  GPUMEM_GRID_STRIDE(i, n) {
    const float g = G[i];
    const float m = beta1 * M[i] + one_b1 * g;
    const float v = beta2 * V[i] + one_b2 * g * g;
    M[i] = m;
    V[i] = v;
    W[i] -= step_size * m / (sqrtf(v) * inv_sqrt_bc2 + eps);
  }
}

__global__ void random_ints_kernel(std::int32_t* out, std::uint64_t n, std::uint32_t modulo, std::uint64_t key,
                                   std::uint64_t offset) {
  GPUMEM_GRID_STRIDE(i, n) out[i] = static_cast<std::int32_t>(rng::bits(key, offset + i) % modulo);
}

__global__ void random_normal_kernel(float* out, std::uint64_t n, std::uint64_t key, std::uint64_t offset) {
  GPUMEM_GRID_STRIDE(i, n) out[i] = rng::normal(rng::bits(key, offset + i));
}

__global__ void random_uniform_kernel(float* out, std::uint64_t n, float low, float high, std::uint64_t key,
                                      std::uint64_t offset) {
  GPUMEM_GRID_STRIDE(i, n) out[i] = rng::uniform_in(rng::bits(key, offset + i), low, high);
}

template <class T>
__global__ void fill_kernel(T* p, std::uint64_t n, T value) {
  GPUMEM_GRID_STRIDE(i, n) p[i] = value;
}

__global__ void fill4_kernel(float4* p, std::uint64_t n4, float value) {
  const float4 v = make_float4(value, value, value, value);
  GPUMEM_GRID_STRIDE(i, n4) p[i] = v;
}

__global__ void scale_kernel(float alpha, const float* X, float* Y, std::uint64_t n) {
  GPUMEM_GRID_STRIDE(i, n) Y[i] = alpha * X[i];
}

__global__ void axpy_kernel(float alpha, const float* X, float* Y, std::uint64_t n) {
  GPUMEM_GRID_STRIDE(i, n) Y[i] = fmaf(alpha, X[i], Y[i]);
}

__global__ void add_i32_kernel(std::int32_t* p, std::int32_t value) {
  *p = static_cast<std::int32_t>(static_cast<std::uint32_t>(*p) + static_cast<std::uint32_t>(value));
}

std::uint64_t u(i64 n) { return static_cast<std::uint64_t>(n); }

// One event per signalling stream, made on its first use (on the stream's device when the stream
// is not being captured, where its device can be asked) and kept for the process's life, like the
// ops' scratch buffers. Each use records it and has the waiter wait on it at once, so one event
// per stream serves every fork and join.
cudaEvent_t event_for(cudaStream_t stream) {
  static std::mutex mutex;
  static std::unordered_map<cudaStream_t, cudaEvent_t> events;
  std::lock_guard<std::mutex> lock(mutex);
  cudaEvent_t& e = events[stream];
  if (e != nullptr) return e;
  int device = -1;
#if defined(CUDART_VERSION) && CUDART_VERSION >= 12080
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (stream != nullptr) {
    detail::check_cuda(cudaStreamIsCapturing(stream, &capture), "streamWait (cudaStreamIsCapturing)");
    if (capture == cudaStreamCaptureStatusNone)
      detail::check_cuda(cudaStreamGetDevice(stream, &device), "streamWait (cudaStreamGetDevice)");
  }
#endif
  if (device < 0) detail::check_cuda(cudaGetDevice(&device), "streamWait (cudaGetDevice)");
  detail::device_scope scope(device);
  detail::check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "streamWait (cudaEventCreate)");
  return e;
}

}  // namespace

void add_i32(stream_handle s, std::int32_t* ptr, std::int32_t value) {
  add_i32_kernel<<<1, 1, 0, as_cuda(s)>>>(ptr, value);
  check_launch("addI32 launch");
}

void stream_wait(stream_handle waiter, stream_handle signaller) {
  const cudaEvent_t e = event_for(as_cuda(signaller));
  detail::check_cuda(cudaEventRecord(e, as_cuda(signaller)), "streamWait (cudaEventRecord)");
  detail::check_cuda(cudaStreamWaitEvent(as_cuda(waiter), e, 0), "streamWait (cudaStreamWaitEvent)");
}

namespace {

}  // namespace

void relu(stream_handle s, const float* X, float* Y, i64 n) {
  relu_kernel<<<grid_for(u(n)), block_threads, 0, as_cuda(s)>>>(X, Y, u(n));
  check_launch("relu launch");
}

void relu_backward(stream_handle s, const float* Y, const float* dY, float* dX, i64 n) {
  relu_backward_kernel<<<grid_for(u(n)), block_threads, 0, as_cuda(s)>>>(Y, dY, dX, u(n));
  check_launch("reluBackward launch");
}

void dropout(stream_handle s, const float* X, float* Y, std::uint8_t* mask, i64 n, double p, float scale,
             std::uint64_t seed, std::uint64_t offset) {
  dropout_kernel<<<grid_for(u(n)), block_threads, 0, as_cuda(s)>>>(X, Y, mask, u(n), p, scale, rng::key_of(seed),
                                                                   offset);
  check_launch("dropout launch");
}

void dropout_backward(stream_handle s, const float* dY, const std::uint8_t* mask, float* dX, i64 n, float scale) {
  dropout_backward_kernel<<<grid_for(u(n)), block_threads, 0, as_cuda(s)>>>(dY, mask, dX, u(n), scale);
  check_launch("dropoutBackward launch");
}

void sgd(stream_handle s, float* W, const float* G, i64 n, float lr) {
  sgd_kernel<<<grid_for(u(n)), block_threads, 0, as_cuda(s)>>>(W, G, u(n), lr);
  check_launch("sgd launch");
}

void adam(stream_handle s, float* W, const float* G, float* M, float* V, i64 n, float /*lr*/, float beta1, float beta2,
          float eps, float step_size, float inv_sqrt_bc2) {
  adam_kernel<<<grid_for(u(n)), block_threads, 0, as_cuda(s)>>>(W, G, M, V, u(n), beta1, beta2, eps, step_size,
                                                                inv_sqrt_bc2);
  check_launch("adam launch");
}

void random_ints(stream_handle s, std::int32_t* out, i64 n, std::uint32_t modulo, std::uint64_t seed,
                 std::uint64_t offset) {
  random_ints_kernel<<<grid_for(u(n)), block_threads, 0, as_cuda(s)>>>(out, u(n), modulo, rng::key_of(seed), offset);
  check_launch("randomInts launch");
}

void random_normal(stream_handle s, float* out, i64 n, std::uint64_t seed, std::uint64_t offset) {
  random_normal_kernel<<<grid_for(u(n)), block_threads, 0, as_cuda(s)>>>(out, u(n), rng::key_of(seed), offset);
  check_launch("randomNormal launch");
}

void random_uniform(stream_handle s, float* out, i64 n, float low, float high, std::uint64_t seed,
                    std::uint64_t offset) {
  random_uniform_kernel<<<grid_for(u(n)), block_threads, 0, as_cuda(s)>>>(out, u(n), low, high, rng::key_of(seed),
                                                                          offset);
  check_launch("randomUniform launch");
}

void fill_f32(stream_handle s, float* ptr, i64 n, float value) {
  if (aligned16(ptr) && n >= 4) {
    const std::uint64_t n4 = u(n) / 4;
    fill4_kernel<<<grid_for(n4), block_threads, 0, as_cuda(s)>>>(reinterpret_cast<float4*>(ptr), n4, value);
    check_launch("fillF32 launch");
    const std::uint64_t rest = u(n) - n4 * 4;
    if (rest == 0) return;
    ptr += n4 * 4;
    n = static_cast<i64>(rest);
  }
  fill_kernel<float><<<grid_for(u(n)), block_threads, 0, as_cuda(s)>>>(ptr, u(n), value);
  check_launch("fillF32 launch");
}

void fill_i32(stream_handle s, std::int32_t* ptr, i64 n, std::int32_t value) {
  if (value == 0) {
    detail::check_cuda(cudaMemsetAsync(ptr, 0, u(n) * sizeof(std::int32_t), as_cuda(s)), "fillI32 (cudaMemsetAsync)");
    return;
  }
  fill_kernel<std::int32_t><<<grid_for(u(n)), block_threads, 0, as_cuda(s)>>>(ptr, u(n), value);
  check_launch("fillI32 launch");
}

void scale(stream_handle s, float alpha, const float* X, float* Y, i64 n) {
  scale_kernel<<<grid_for(u(n)), block_threads, 0, as_cuda(s)>>>(alpha, X, Y, u(n));
  check_launch("scale launch");
}

void axpy(stream_handle s, float alpha, const float* X, float* Y, i64 n) {
  axpy_kernel<<<grid_for(u(n)), block_threads, 0, as_cuda(s)>>>(alpha, X, Y, u(n));
  check_launch("axpy launch");
}

}  // namespace gpumem::ops::gpu
