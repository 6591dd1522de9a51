// Graph ops on the GPU. Rows of H features are handled by groups of G threads (G a power of two up
// to 32, about the row's width), with float4 loads when H % 4 == 0 and the pointers are 16-byte
// aligned. spmm sums each row's nonzeros in CSR order in one thread per output element, so it is
// deterministic; scatterAddRows uses float atomics (the order of additions, and so the last bits,
// can change from run to run). csrBuild sorts (row, col) pairs with CUB's stable radix sort and
// derives rowptr from the sorted rows; all its scratch comes from the caller's temp buffer.
#include <algorithm>

#include <cub/device/device_radix_sort.cuh>

#include "bf16.hpp"
#include "edge_norm.hpp"
#include "kernel_common.cuh"

namespace gpumem::ops::gpu {
namespace {

__device__ __forceinline__ void fma4(float4& acc, float v, const float4& x) {
  acc.x += v * x.x;
  acc.y += v * x.y;
  acc.z += v * x.z;
  acc.w += v * x.w;
}
__device__ __forceinline__ void fma4(float& acc, float v, float x) { acc += v * x; }
template <class T>
__device__ __forceinline__ T zero();
template <>
__device__ __forceinline__ float zero<float>() {
  return 0.0f;
}
template <>
__device__ __forceinline__ float4 zero<float4>() {
  return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}
template <class T>
__device__ __forceinline__ T nan_value();
template <>
__device__ __forceinline__ float nan_value<float>() {
  return __int_as_float(0x7fc00000);
}
template <>
__device__ __forceinline__ float4 nan_value<float4>() {
  const float n = __int_as_float(0x7fc00000);
  return make_float4(n, n, n, n);
}

__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(float4* p, float4 v) {
#if __CUDA_ARCH__ >= 900
  atomicAdd(p, v);
#else
  float* f = reinterpret_cast<float*>(p);
  atomicAdd(f, v.x);
  atomicAdd(f + 1, v.y);
  atomicAdd(f + 2, v.z);
  atomicAdd(f + 3, v.w);
#endif
}

// The group of G threads this thread belongs to, its lane in it, and the number of groups.
template <int G>
struct group_pos {
  std::int64_t group, groups;
  int lane;
  __device__ group_pos() {
    const std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    group = t / G;
    lane = int(t % G);
    groups = (std::int64_t(gridDim.x) * blockDim.x) / G;
  }
};

// Rows of X as they are read: f32 as it is, bf16 (the upper halves of floats) widened to f32. In is
// float or float4 (f32), uint16_t or uint2 (1 or 4 bf16 values; little-endian, so the lower half of
// a 32-bit word is the earlier value).
__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float4 widen(float4 v) { return v; }
__device__ __forceinline__ float widen(std::uint16_t v) { return __uint_as_float(f32_bits_from_bf16(v)); }
__device__ __forceinline__ float4 widen(uint2 v) {
  return make_float4(__uint_as_float(v.x << 16), __uint_as_float(v.x & 0xffff0000u), __uint_as_float(v.y << 16),
                     __uint_as_float(v.y & 0xffff0000u));
}

// Out is float or float4, In the matching row element (see widen); W = elements of In per row.
template <int G, class In, class Out>
__global__ void spmm_kernel(const std::int32_t* __restrict__ rowptr, const std::int32_t* __restrict__ col,
                            const float* __restrict__ val, const In* __restrict__ X, Out* __restrict__ out,
                            std::int64_t N, std::int64_t W) {
  const group_pos<G> g;
  for (std::int64_t row = g.group; row < N; row += g.groups) {
    const std::int64_t e0 = rowptr[row], e1 = rowptr[row + 1];
    for (std::int64_t c = g.lane; c < W; c += G) {
      Out acc = zero<Out>();
      std::int64_t e = e0;
      for (; e + 4 <= e1; e += 4) {  // four independent loads in flight, added in order
        const std::int64_t c0 = col[e], c1 = col[e + 1], c2 = col[e + 2], c3 = col[e + 3];
        const float v0 = val[e], v1 = val[e + 1], v2 = val[e + 2], v3 = val[e + 3];
        const In x0 = X[c0 * W + c], x1 = X[c1 * W + c], x2 = X[c2 * W + c], x3 = X[c3 * W + c];
        fma4(acc, v0, widen(x0));
        fma4(acc, v1, widen(x1));
        fma4(acc, v2, widen(x2));
        fma4(acc, v3, widen(x3));
      }
      for (; e < e1; ++e) fma4(acc, val[e], widen(X[std::int64_t(col[e]) * W + c]));
      out[row * W + c] = acc;
    }
  }
}

// Rounded to nearest even (bf16.hpp).
__global__ void f32_to_bf16_kernel(const float* __restrict__ X, std::uint16_t* __restrict__ Y, std::uint64_t n) {
  for (std::uint64_t i = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::uint64_t(gridDim.x) * blockDim.x) {
    Y[i] = bf16_from_f32_bits(__float_as_uint(X[i]));
  }
}

template <int G, class T>
__global__ void gather_kernel(const T* __restrict__ X, const std::int32_t* __restrict__ index, T* __restrict__ out,
                              std::int64_t E, std::int64_t W) {
  const group_pos<G> g;
  for (std::int64_t e = g.group; e < E; e += g.groups) {
    const std::int64_t r = index[e];
    for (std::int64_t c = g.lane; c < W; c += G) out[e * W + c] = r >= 0 ? X[r * W + c] : nan_value<T>();
  }
}

// A batch: block b copies rows b, b + gridDim.x, ... of the batch, row e being row index[first + e]
// of X (W elements of T, one per thread at a time) and its label, where first is *step * rows
// (step null: 0). A block per row keeps a batch's few rows spread over many multiprocessors. A
// negative index gives a NaN row and label -1.
template <class T>
__global__ void gather_batch_kernel(const T* __restrict__ X, const std::int32_t* __restrict__ labels,
                                    const std::int32_t* __restrict__ index, const std::int32_t* __restrict__ step,
                                    std::int64_t rows, std::int64_t W, T* __restrict__ x_out,
                                    std::int32_t* __restrict__ y_out) {
  const std::int64_t first = (step != nullptr ? std::int64_t(*step) : 0) * rows;
  for (std::int64_t e = blockIdx.x; e < rows; e += gridDim.x) {
    const std::int64_t r = index[first + e];
    for (std::int64_t c = threadIdx.x; c < W; c += blockDim.x) x_out[e * W + c] = r >= 0 ? X[r * W + c] : nan_value<T>();
    if (threadIdx.x == 0) y_out[e] = r >= 0 ? labels[r] : -1;
  }
}

template <int G, class T>
__global__ void scatter_add_kernel(const T* __restrict__ src, const std::int32_t* __restrict__ index, T* out,
                                   std::int64_t E, std::int64_t W) {
  const group_pos<G> g;
  for (std::int64_t e = g.group; e < E; e += g.groups) {
    const std::int64_t r = index[e];
    if (r < 0) continue;
    for (std::int64_t c = g.lane; c < W; c += G) atomic_add(&out[r * W + c], src[e * W + c]);
  }
}

int group_for(std::int64_t width) {
  int g = 1;
  while (g < 32 && g < width) g <<= 1;
  return g;
}

unsigned blocks_for_groups(std::int64_t items, int G) { return grid_for(std::uint64_t(items) * G); }

// Calls f.template operator()<G>() for the runtime G.
template <class F>
void with_group(int G, F&& f) {
  switch (G) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 8: f(std::integral_constant<int, 8>{}); break;
    case 16: f(std::integral_constant<int, 16>{}); break;
    default: f(std::integral_constant<int, 32>{}); break;
  }
}

// Runs launch(group, in, out, W) for rows of H floats read from `in` and written to `out`, the two
// pointers passed as float4 (W = H / 4) where H is a multiple of 4 and both are 16-byte aligned, as
// float (W = H) otherwise; the group of threads per row follows W.
template <class F>
void with_float_lanes(const float* in, float* out, std::int64_t H, F&& launch) {
  const bool v4 = H % 4 == 0 && aligned16(in) && aligned16(out);
  const std::int64_t W = v4 ? H / 4 : H;
  with_group(group_for(W), [&](auto gc) {
    if (v4) launch(gc, reinterpret_cast<const float4*>(in), reinterpret_cast<float4*>(out), W);
    else launch(gc, in, out, W);
  });
}

__global__ void rowptr_from_sorted_kernel(const std::uint32_t* __restrict__ keys, std::int64_t E, std::int64_t N,
                                          std::int32_t* rowptr) {
  // Rows prev+1 .. cur start at edge e (for sorted keys in [0, N) every rowptr entry is written
  // once); clamped to [0, N] so that bad keys never write out of bounds.
  GPUMEM_GRID_STRIDE(i, std::uint64_t(E) + 1) {
    const std::int64_t e = std::int64_t(i);
    std::int64_t prev = e == 0 ? -1 : std::int64_t(keys[e - 1]);
    std::int64_t cur = e == E ? N : std::int64_t(keys[e]);
    if (prev > N) prev = N;
    if (cur > N) cur = N;
    for (std::int64_t r = prev + 1; r <= cur; ++r) rowptr[r] = std::int32_t(e);
  }
}

__global__ void row_degrees_kernel(const std::int32_t* __restrict__ rowptr, std::uint64_t N, float* deg) {
  GPUMEM_GRID_STRIDE(i, N) deg[i] = static_cast<float>(rowptr[i + 1] - rowptr[i]);
}

constexpr int edge_group = 8;

__global__ void edge_norm_list_kernel(const std::int32_t* __restrict__ src, const std::int32_t* __restrict__ dst,
                                      const float* __restrict__ deg, std::uint64_t E, int mode, float* w) {
  GPUMEM_GRID_STRIDE(e, E) {
    const std::int32_t u = src[e], v = dst[e];
    w[e] = u < 0 || v < 0 ? nan_value<float>() : edge_norm_value(deg[v], deg[u], mode);
  }
}

__global__ void scale_rows_kernel(const float* __restrict__ X, const float* __restrict__ w, float* out,
                                  std::uint64_t n, std::uint64_t H) {
  GPUMEM_GRID_STRIDE(i, n) out[i] = X[i] * w[i / H];
}

__global__ void edge_norm_kernel(const std::int32_t* __restrict__ rowptr, const std::int32_t* __restrict__ col,
                                 std::int64_t N, const float* __restrict__ deg, int mode, float* val) {
  const group_pos<edge_group> g;
  for (std::int64_t row = g.group; row < N; row += g.groups) {
    const float dr = deg[row];
    const std::int64_t e1 = rowptr[row + 1];
    for (std::int64_t e = rowptr[row] + g.lane; e < e1; e += edge_group) {
      const std::int64_t c = col[e];
      val[e] = c < 0 || c >= N ? nan_value<float>() : edge_norm_value(dr, deg[c], mode);
    }
  }
}

std::size_t align256(std::size_t n) { return (n + 255) & ~std::size_t(255); }

int key_bits(i64 N) {
  int bits = 1;
  while (bits < 32 && (std::uint64_t{1} << bits) < std::uint64_t(N)) ++bits;
  return bits;  // keys in [0, N) fit in `bits` bits
}

std::size_t cub_sort_bytes(i64 E, i64 N, cudaStream_t st) {
  std::size_t bytes = 0;
  detail::check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const std::uint32_t*>(nullptr),
                                                     static_cast<std::uint32_t*>(nullptr),
                                                     static_cast<const std::int32_t*>(nullptr),
                                                     static_cast<std::int32_t*>(nullptr), int(E), 0, key_bits(N), st),
                     "csrBuild (cub::DeviceRadixSort temp size)");
  return bytes;
}

}  // namespace

void spmm(stream_handle s, const std::int32_t* rowptr, const std::int32_t* col, const float* val, const float* X,
          float* out, i64 N, i64 H) {
  cudaStream_t st = as_cuda(s);
  with_float_lanes(X, out, H, [&](auto gc, auto x, auto o, std::int64_t W) {
    constexpr int g = decltype(gc)::value;
    spmm_kernel<g><<<blocks_for_groups(N, g), block_threads, 0, st>>>(rowptr, col, val, x, o, N, W);
  });
  check_launch("spmm launch");
}

void spmm_bf16(stream_handle s, const std::int32_t* rowptr, const std::int32_t* col, const float* val,
               const std::uint16_t* X, float* out, i64 N, i64 H) {
  cudaStream_t st = as_cuda(s);
  const bool v4 = H % 4 == 0 && (reinterpret_cast<std::uintptr_t>(X) & 7u) == 0 && aligned16(out);
  const std::int64_t W = v4 ? H / 4 : H;
  const int G = group_for(W);
  with_group(G, [&](auto gc) {
    constexpr int g = decltype(gc)::value;
    if (v4)
      spmm_kernel<g, uint2, float4><<<blocks_for_groups(N, g), block_threads, 0, st>>>(
          rowptr, col, val, reinterpret_cast<const uint2*>(X), reinterpret_cast<float4*>(out), N, W);
    else
      spmm_kernel<g, std::uint16_t, float><<<blocks_for_groups(N, g), block_threads, 0, st>>>(rowptr, col, val, X,
                                                                                                   out, N, W);
  });
  check_launch("spmmBf16 launch");
}

void f32_to_bf16(stream_handle s, const float* X, std::uint16_t* Y, i64 n) {
  f32_to_bf16_kernel<<<grid_for(std::uint64_t(n)), block_threads, 0, as_cuda(s)>>>(X, Y, std::uint64_t(n));
  check_launch("f32ToBf16 launch");
}

void gather_rows(stream_handle s, const float* X, const std::int32_t* index, float* out, i64 E, i64 H) {
  cudaStream_t st = as_cuda(s);
  with_float_lanes(X, out, H, [&](auto gc, auto x, auto o, std::int64_t W) {
    constexpr int g = decltype(gc)::value;
    gather_kernel<g><<<blocks_for_groups(E, g), block_threads, 0, st>>>(x, index, o, E, W);
  });
  check_launch("gatherRows launch");
}

void gather_batch(stream_handle s, const float* X, const std::int32_t* labels, const std::int32_t* index,
                  const std::int32_t* step, i64 rows, i64 H, float* x_out, std::int32_t* y_out) {
  cudaStream_t st = as_cuda(s);
  const bool v4 = H % 4 == 0 && aligned16(X) && aligned16(x_out);
  const std::int64_t W = v4 ? H / 4 : H;
  const unsigned blocks = unsigned(std::min<std::int64_t>(rows, 65535));
  const int threads = int(std::min<std::int64_t>(block_threads, std::max<std::int64_t>(32, (W + 31) / 32 * 32)));
  if (v4)
    gather_batch_kernel<float4><<<blocks, threads, 0, st>>>(reinterpret_cast<const float4*>(X), labels, index, step, rows,
                                                           W, reinterpret_cast<float4*>(x_out), y_out);
  else
    gather_batch_kernel<float><<<blocks, threads, 0, st>>>(X, labels, index, step, rows, W, x_out, y_out);
  check_launch("gatherBatch launch");
}

void scatter_add_rows(stream_handle s, const float* src, const std::int32_t* index, float* out, i64 E, i64 H) {
  cudaStream_t st = as_cuda(s);
  with_float_lanes(src, out, H, [&](auto gc, auto x, auto o, std::int64_t W) {
    constexpr int g = decltype(gc)::value;
    scatter_add_kernel<g><<<blocks_for_groups(E, g), block_threads, 0, st>>>(x, index, o, E, W);
  });
  check_launch("scatterAddRows launch");
}

std::size_t csr_build_temp_bytes(i64 E, i64 N) {
  if (E == 0) return 0;
  return align256(cub_sort_bytes(E, N, nullptr)) + align256(std::size_t(E) * sizeof(std::uint32_t));
}

void csr_build(stream_handle s, const std::int32_t* rows, const std::int32_t* cols, i64 E, i64 N,
               std::int32_t* rowptr, std::int32_t* col_out, void* temp, std::size_t /*temp_bytes*/) {
  cudaStream_t st = as_cuda(s);
  if (E == 0) {
    detail::check_cuda(cudaMemsetAsync(rowptr, 0, std::size_t(N + 1) * sizeof(std::int32_t), st),
                       "csrBuild (zero rowptr)");
    return;
  }
  std::size_t cub_bytes = cub_sort_bytes(E, N, st);
  char* base = static_cast<char*>(temp);
  auto* keys_out = reinterpret_cast<std::uint32_t*>(base + align256(cub_bytes));
  detail::check_cuda(cub::DeviceRadixSort::SortPairs(base, cub_bytes, reinterpret_cast<const std::uint32_t*>(rows),
                                                     keys_out, cols, col_out, int(E), 0, key_bits(N), st),
                     "csrBuild (cub::DeviceRadixSort::SortPairs)");
  rowptr_from_sorted_kernel<<<grid_for(std::uint64_t(E) + 1), block_threads, 0, st>>>(keys_out, E, N, rowptr);
  check_launch("csrBuild rowptr launch");
}

void row_degrees(stream_handle s, const std::int32_t* rowptr, i64 N, float* deg) {
  row_degrees_kernel<<<grid_for(std::uint64_t(N)), block_threads, 0, as_cuda(s)>>>(rowptr, std::uint64_t(N), deg);
  check_launch("rowDegrees launch");
}

void edge_norm(stream_handle s, const std::int32_t* rowptr, const std::int32_t* col, i64 N, const float* deg, int mode,
               float* val) {
  edge_norm_kernel<<<blocks_for_groups(N, edge_group), block_threads, 0, as_cuda(s)>>>(rowptr, col, N, deg, mode, val);
  check_launch("edgeNorm launch");
}

void edge_norm_list(stream_handle s, const std::int32_t* src, const std::int32_t* dst, const float* deg, i64 E,
                    int mode, float* w) {
  edge_norm_list_kernel<<<grid_for(std::uint64_t(E)), block_threads, 0, as_cuda(s)>>>(src, dst, deg, std::uint64_t(E),
                                                                                      mode, w);
  check_launch("edgeNormList launch");
}

void scale_rows(stream_handle s, const float* X, const float* w, float* out, i64 E, i64 H) {
  scale_rows_kernel<<<grid_for(std::uint64_t(E) * std::uint64_t(H)), block_threads, 0, as_cuda(s)>>>(
      X, w, out, std::uint64_t(E) * std::uint64_t(H), std::uint64_t(H));
  check_launch("scaleRows launch");
}

}  // namespace gpumem::ops::gpu
