// Elementwise ops, optimisers and random generators: argument checks, dispatch to the GPU, and the
// CPU references.
#include <cmath>
#include <limits>

#include "gpumem/errors.hpp"
#include "ops.hpp"
#include "rng.hpp"

namespace gpumem::ops {

namespace {

void check_p(double p) { check::unit_interval(p, "p"); }

float keep_scale(double p) { return static_cast<float>(1.0 / (1.0 - p)); }

}  // namespace

void relu(bool on_device, stream_handle stream, const float* X, float* Y, i64 n) {
  check::non_negative(n, "n");
  if (n == 0) return;
  check::not_null({{X, "X"}, {Y, "Y"}});
  GPUMEM_OPS_ON_DEVICE(relu(stream, X, Y, n));
  for (i64 i = 0; i < n; ++i) Y[i] = X[i] > 0.0f ? X[i] : 0.0f;
}

void relu_backward(bool on_device, stream_handle stream, const float* Y, const float* dY, float* dX, i64 n) {
  check::non_negative(n, "n");
  if (n == 0) return;
  check::not_null({{Y, "Y"}, {dY, "dY"}, {dX, "dX"}});
  GPUMEM_OPS_ON_DEVICE(relu_backward(stream, Y, dY, dX, n));
  for (i64 i = 0; i < n; ++i) dX[i] = Y[i] > 0.0f ? dY[i] : 0.0f;
}

void dropout(bool on_device, stream_handle stream, const float* X, float* Y, std::uint8_t* mask, i64 n, double p,
             std::uint64_t seed, std::uint64_t offset) {
  check::non_negative(n, "n");
  check_p(p);
  if (n == 0) return;
  check::not_null({{X, "X"}, {Y, "Y"}, {mask, "mask"}});
  const float s = keep_scale(p);
  GPUMEM_OPS_ON_DEVICE(dropout(stream, X, Y, mask, n, p, s, seed, offset));
  const std::uint64_t key = rng::key_of(seed);
  for (i64 i = 0; i < n; ++i) {
    const bool keep = rng::uniform24(rng::bits(key, offset + static_cast<std::uint64_t>(i))) >= p;
    mask[i] = keep ? 1 : 0;
    Y[i] = keep ? X[i] * s : 0.0f;
  }
}

void dropout_backward(bool on_device, stream_handle stream, const float* dY, const std::uint8_t* mask, float* dX,
                      i64 n, double p) {
  check::non_negative(n, "n");
  check_p(p);
  if (n == 0) return;
  check::not_null({{dY, "dY"}, {mask, "mask"}, {dX, "dX"}});
  const float s = keep_scale(p);
  GPUMEM_OPS_ON_DEVICE(dropout_backward(stream, dY, mask, dX, n, s));
  for (i64 i = 0; i < n; ++i) dX[i] = mask[i] ? dY[i] * s : 0.0f;
}

void sgd(bool on_device, stream_handle stream, float* W, const float* G, i64 n, float lr) {
  check::non_negative(n, "n");
  if (n == 0) return;
  check::not_null({{W, "W"}, {G, "G"}});
  GPUMEM_OPS_ON_DEVICE(sgd(stream, W, G, n, lr));
  for (i64 i = 0; i < n; ++i) W[i] -= lr * G[i];
}

// PyTorch's Adam (torch.optim.Adam, no weight decay, no amsgrad):
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   W -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
void adam(bool on_device, stream_handle stream, float* W, const float* G, float* M, float* V, i64 n, float lr,
          float beta1, float beta2, float eps, i64 step) {
  check::non_negative(n, "n");
  check::at_least(step, 1, "step");
  check::unit_interval(beta1, "beta1");
  check::unit_interval(beta2, "beta2");
  if (n == 0) return;
  check::not_null({{W, "W"}, {G, "G"}, {M, "M"}, {V, "V"}});
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  const float step_size = static_cast<float>(lr / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  GPUMEM_OPS_ON_DEVICE(adam(stream, W, G, M, V, n, lr, beta1, beta2, eps, step_size, inv_sqrt_bc2));
  const float one_b1 = 1.0f - beta1, one_b2 = 1.0f - beta2;
  for (i64 i = 0; i < n; ++i) {
    const float g = G[i];
    const float m = beta1 * M[i] + one_b1 * g;
    const float v = beta2 * V[i] + one_b2 * g * g;
    M[i] = m;
    V[i] = v;
    W[i] -= step_size * m / (std::sqrt(v) * inv_sqrt_bc2 + eps);
  }
}

void random_ints(bool on_device, stream_handle stream, std::int32_t* out, i64 n, i64 modulo, std::uint64_t seed,
                 std::uint64_t offset) {
  check::non_negative(n, "n");
  if (modulo < 1 || modulo > (i64{1} << 31)) check::fail_range("modulo", "integer in [1, 2^31]", std::to_string(modulo));
  if (n == 0) return;
  check::not_null(out, "out");
  const auto m = static_cast<std::uint32_t>(modulo);
  GPUMEM_OPS_ON_DEVICE(random_ints(stream, out, n, m, seed, offset));
  const std::uint64_t key = rng::key_of(seed);
  for (i64 i = 0; i < n; ++i)
    out[i] = static_cast<std::int32_t>(rng::bits(key, offset + static_cast<std::uint64_t>(i)) % m);
}

void random_normal(bool on_device, stream_handle stream, float* out, i64 n, std::uint64_t seed, std::uint64_t offset) {
  check::non_negative(n, "n");
  if (n == 0) return;
  check::not_null(out, "out");
  GPUMEM_OPS_ON_DEVICE(random_normal(stream, out, n, seed, offset));
  const std::uint64_t key = rng::key_of(seed);
  for (i64 i = 0; i < n; ++i) out[i] = rng::normal(rng::bits(key, offset + static_cast<std::uint64_t>(i)));
}

void random_uniform(bool on_device, stream_handle stream, float* out, i64 n, float low, float high,
                    std::uint64_t seed, std::uint64_t offset) {
  check::non_negative(n, "n");
  if (!(std::isfinite(low) && std::isfinite(high) && low <= high))
    check::fail_range("high", "finite numbers with low <= high", "low " + std::to_string(low) + ", high " + std::to_string(high));
  if (n == 0) return;
  check::not_null(out, "out");
  GPUMEM_OPS_ON_DEVICE(random_uniform(stream, out, n, low, high, seed, offset));
  const std::uint64_t key = rng::key_of(seed);
  for (i64 i = 0; i < n; ++i)
    out[i] = rng::uniform_in(rng::bits(key, offset + static_cast<std::uint64_t>(i)), low, high);
}

void fill_f32(bool on_device, stream_handle stream, float* ptr, i64 n, float value) {
  check::non_negative(n, "n");
  if (n == 0) return;
  check::not_null(ptr, "ptr");
  GPUMEM_OPS_ON_DEVICE(fill_f32(stream, ptr, n, value));
  for (i64 i = 0; i < n; ++i) ptr[i] = value;
}

void fill_i32(bool on_device, stream_handle stream, std::int32_t* ptr, i64 n, std::int32_t value) {
  check::non_negative(n, "n");
  if (n == 0) return;
  check::not_null(ptr, "ptr");
  GPUMEM_OPS_ON_DEVICE(fill_i32(stream, ptr, n, value));
  for (i64 i = 0; i < n; ++i) ptr[i] = value;
}

void add_i32(bool on_device, stream_handle stream, std::int32_t* ptr, std::int32_t value) {
  check::not_null(ptr, "ptr");
  GPUMEM_OPS_ON_DEVICE(add_i32(stream, ptr, value));
  *ptr = static_cast<std::int32_t>(static_cast<std::uint32_t>(*ptr) + static_cast<std::uint32_t>(value));
}

void stream_wait(bool on_device, stream_handle waiter, stream_handle signaller) {
  if (!on_device) return;  // CPU ops run synchronously, in call order
#ifdef GPUMEM_WITH_CUDA
  if (waiter == signaller) return;
  gpu::stream_wait(waiter, signaller);
#else
  (void)waiter;
  (void)signaller;
  check::no_cuda();
#endif
}

void scale(bool on_device, stream_handle stream, float alpha, const float* X, float* Y, i64 n) {
  check::non_negative(n, "n");
  if (n == 0) return;
  check::not_null({{X, "X"}, {Y, "Y"}});
  GPUMEM_OPS_ON_DEVICE(scale(stream, alpha, X, Y, n));
  for (i64 i = 0; i < n; ++i) Y[i] = alpha * X[i];
}

void axpy(bool on_device, stream_handle stream, float alpha, const float* X, float* Y, i64 n) {
  check::non_negative(n, "n");
  if (n == 0) return;
  check::not_null({{X, "X"}, {Y, "Y"}});
  GPUMEM_OPS_ON_DEVICE(axpy(stream, alpha, X, Y, n));
  for (i64 i = 0; i < n; ++i) Y[i] = std::fma(alpha, X[i], Y[i]);
}

}  // namespace gpumem::ops
