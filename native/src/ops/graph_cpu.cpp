// Graph ops (gather/scatter of rows, CSR sparse-dense product, CSR construction, degrees, edge
// normalisation): argument checks, dispatch to the GPU, and the CPU references.
#include <cmath>
#include <cstring>

#include "gpumem/errors.hpp"
#include "bf16.hpp"
#include "edge_norm.hpp"
#include "ops.hpp"

namespace gpumem::ops {
namespace {

using check::bad_index;

void check_i32(i64 v, const char* name) { check::fits_i32(v, name); }

// The sizes of a [rows, H] operand (rows named rows_name) checked >= 0; true when it is empty, so
// the op has nothing to do.
bool empty_rows(i64 rows, const char* rows_name, i64 H) {
  check::non_negative(rows, rows_name);
  check::non_negative(H, "H");
  return rows == 0 || H == 0;
}

}  // namespace

void gather_rows(bool on_device, stream_handle stream, const float* X, const std::int32_t* index, float* out, i64 E,
                 i64 H) {
  if (empty_rows(E, "E", H)) return;
  check::not_null({{X, "X"}, {index, "index"}, {out, "out"}});
  GPUMEM_OPS_ON_DEVICE(gather_rows(stream, X, index, out, E, H));
  const std::size_t row_bytes = static_cast<std::size_t>(H) * sizeof(float);
  for (i64 e = 0; e < E; ++e) {
    const i64 r = index[e];
    if (r < 0) bad_index("index", e, r);
    std::memcpy(out + e * H, X + r * H, row_bytes);
  }
}

void gather_batch(bool on_device, stream_handle stream, const float* X, const std::int32_t* labels,
                  const std::int32_t* index, const std::int32_t* step, i64 rows, i64 H, float* x_out,
                  std::int32_t* y_out) {
  check::non_negative(rows, "rows");
  check::non_negative(H, "H");
  if (rows == 0) return;
  check::not_null({{X, "X"}, {labels, "labels"}, {index, "index"}, {x_out, "xOut"}, {y_out, "yOut"}});
  GPUMEM_OPS_ON_DEVICE(gather_batch(stream, X, labels, index, step, rows, H, x_out, y_out));
  const i64 first = (step != nullptr ? i64(*step) : 0) * rows;
  if (first < 0)
    check::fail_range("step", "non-negative integer", std::to_string(*step));
  const std::size_t row_bytes = static_cast<std::size_t>(H) * sizeof(float);
  for (i64 r = 0; r < rows; ++r) {
    const i64 i = index[first + r];
    if (i < 0) bad_index("index", first + r, i);
    if (H > 0) std::memcpy(x_out + r * H, X + i * H, row_bytes);
    y_out[r] = labels[i];
  }
}

void scatter_add_rows(bool on_device, stream_handle stream, const float* src, const std::int32_t* index, float* out,
                      i64 E, i64 H) {
  if (empty_rows(E, "E", H)) return;
  check::not_null({{src, "src"}, {index, "index"}, {out, "out"}});
  GPUMEM_OPS_ON_DEVICE(scatter_add_rows(stream, src, index, out, E, H));
  for (i64 e = 0; e < E; ++e) {
    const i64 r = index[e];
    if (r < 0) bad_index("index", e, r);
    float* o = out + r * H;
    const float* s = src + e * H;
    for (i64 h = 0; h < H; ++h) o[h] += s[h];
  }
}

namespace {
float widen(float v) { return v; }
float widen(std::uint16_t b) {
  const std::uint32_t u = f32_bits_from_bf16(b);
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Row by row, each row's nonzeros in CSR order: out[i,:] = sum_e val[e] * widen(X[col[e],:]).
template <class T>
void spmm_rows(const std::int32_t* rowptr, const std::int32_t* col, const float* val, const T* X, float* out, i64 N,
               i64 H) {
  for (i64 i = 0; i < N; ++i) {
    float* o = out + i * H;
    for (i64 h = 0; h < H; ++h) o[h] = 0.0f;
    const i64 e0 = rowptr[i], e1 = rowptr[i + 1];
    for (i64 e = e0; e < e1; ++e) {
      const i64 c = col[e];
      if (c < 0) bad_index("col", e, c);
      const float v = val[e];
      const T* x = X + c * H;
      for (i64 h = 0; h < H; ++h) o[h] += v * widen(x[h]);
    }
  }
}
}  // namespace

void spmm(bool on_device, stream_handle stream, const std::int32_t* rowptr, const std::int32_t* col, const float* val,
          const float* X, float* out, i64 N, i64 H) {
  if (empty_rows(N, "N", H)) return;
  check::not_null({{rowptr, "rowptr"}, {out, "out"}});
  GPUMEM_OPS_ON_DEVICE(spmm(stream, rowptr, col, val, X, out, N, H));
  spmm_rows(rowptr, col, val, X, out, N, H);
}

// spmm over bf16 X (the upper halves of floats), accumulated in f32 in the same order.
void spmm_bf16(bool on_device, stream_handle stream, const std::int32_t* rowptr, const std::int32_t* col,
               const float* val, const std::uint16_t* X, float* out, i64 N, i64 H) {
  if (empty_rows(N, "N", H)) return;
  check::not_null({{rowptr, "rowptr"}, {out, "out"}});
  GPUMEM_OPS_ON_DEVICE(spmm_bf16(stream, rowptr, col, val, X, out, N, H));
  spmm_rows(rowptr, col, val, X, out, N, H);
}

// Rounded to nearest even (bf16.hpp), as the GPU kernel.
void f32_to_bf16(bool on_device, stream_handle stream, const float* X, std::uint16_t* Y, i64 n) {
  check::non_negative(n, "n");
  if (n == 0) return;
  check::not_null({{X, "X"}, {Y, "Y"}});
  GPUMEM_OPS_ON_DEVICE(f32_to_bf16(stream, X, Y, n));
  for (i64 i = 0; i < n; ++i) {
    std::uint32_t u;
    std::memcpy(&u, &X[i], sizeof u);
    Y[i] = bf16_from_f32_bits(u);
  }
}

std::size_t csr_build_temp_bytes(bool on_device, i64 E, i64 N) {
  check::non_negative(E, "E");
  check::non_negative(N, "N");
  check_i32(E, "E");
  check_i32(N, "N");
  if (on_device) {
#ifdef GPUMEM_WITH_CUDA
    return gpu::csr_build_temp_bytes(E, N);
#else
    check::no_cuda();
#endif
  }
  return 0;  // the CPU's counting sort works in rowptr and colOut
}

// Stable counting sort by row: counts in rowptr[r+1], prefix sums, then each edge placed at its
// row's cursor (rowptr[r], which ends at the start of row r+1), and the cursors shifted back.
void csr_build(bool on_device, stream_handle stream, const std::int32_t* rows, const std::int32_t* cols, i64 E, i64 N,
               std::int32_t* rowptr, std::int32_t* col_out, void* temp, std::size_t temp_bytes) {
  check::non_negative(E, "E");
  check::non_negative(N, "N");
  check_i32(E, "E");
  check_i32(N, "N");
  check::not_null(rowptr, "rowptr");
  if (E > 0) check::not_null({{rows, "rows"}, {cols, "cols"}, {col_out, "colOut"}});
  const std::size_t need = csr_build_temp_bytes(on_device, E, N);
  if (temp_bytes < need)
    check::fail_range("tempBytes", "at least " + std::to_string(need) + " (csrBuildTempBytes)", std::to_string(temp_bytes));
  if (need > 0) check::not_null(temp, "temp");
  GPUMEM_OPS_ON_DEVICE(csr_build(stream, rows, cols, E, N, rowptr, col_out, temp, temp_bytes));
  for (i64 e = 0; e < E; ++e)
    if (rows[e] < 0 || rows[e] >= N) bad_index("rows", e, rows[e]);
  std::memset(rowptr, 0, static_cast<std::size_t>(N + 1) * sizeof(std::int32_t));
  for (i64 e = 0; e < E; ++e) ++rowptr[rows[e] + 1];
  for (i64 r = 0; r < N; ++r) rowptr[r + 1] += rowptr[r];
  for (i64 e = 0; e < E; ++e) col_out[rowptr[rows[e]]++] = cols[e];
  for (i64 r = N; r > 0; --r) rowptr[r] = rowptr[r - 1];
  rowptr[0] = 0;
}

void row_degrees(bool on_device, stream_handle stream, const std::int32_t* rowptr, i64 N, float* deg) {
  check::non_negative(N, "N");
  if (N == 0) return;
  check::not_null({{rowptr, "rowptr"}, {deg, "deg"}});
  GPUMEM_OPS_ON_DEVICE(row_degrees(stream, rowptr, N, deg));
  for (i64 i = 0; i < N; ++i) deg[i] = static_cast<float>(rowptr[i + 1] - rowptr[i]);
}

void edge_norm(bool on_device, stream_handle stream, const std::int32_t* rowptr, const std::int32_t* col, i64 N,
               const float* deg, int mode, float* val) {
  check::non_negative(N, "N");
  if (mode < 0 || mode > 2)
    check::fail_range("mode", "0 (symmetric), 1 (by row) or 2 (by column)", std::to_string(mode));
  if (N == 0) return;
  check::not_null({{rowptr, "rowptr"}, {deg, "deg"}});
  GPUMEM_OPS_ON_DEVICE(edge_norm(stream, rowptr, col, N, deg, mode, val));
  for (i64 i = 0; i < N; ++i) {
    for (i64 e = rowptr[i]; e < rowptr[i + 1]; ++e) {
      const i64 c = col[e];
      if (c < 0 || c >= N) bad_index("col", e, c);
      val[e] = edge_norm_value(deg[i], deg[c], mode);
    }
  }
}

void edge_norm_list(bool on_device, stream_handle stream, const std::int32_t* src, const std::int32_t* dst,
                    const float* deg, i64 E, int mode, float* w) {
  check::non_negative(E, "E");
  if (mode < 0 || mode > 2)
    check::fail_range("mode", "0 (symmetric), 1 (by target) or 2 (by source)", std::to_string(mode));
  if (E == 0) return;
  check::not_null({{src, "src"}, {dst, "dst"}, {deg, "deg"}, {w, "w"}});
  GPUMEM_OPS_ON_DEVICE(edge_norm_list(stream, src, dst, deg, E, mode, w));
  for (i64 e = 0; e < E; ++e) {
    if (src[e] < 0) bad_index("src", e, src[e]);
    if (dst[e] < 0) bad_index("dst", e, dst[e]);
    w[e] = edge_norm_value(deg[dst[e]], deg[src[e]], mode);
  }
}

void scale_rows(bool on_device, stream_handle stream, const float* X, const float* w, float* out, i64 E, i64 H) {
  if (empty_rows(E, "E", H)) return;
  check::not_null({{X, "X"}, {w, "w"}, {out, "out"}});
  GPUMEM_OPS_ON_DEVICE(scale_rows(stream, X, w, out, E, H));
  for (i64 e = 0; e < E; ++e) {
    const float we = w[e];
    for (i64 j = 0; j < H; ++j) out[e * H + j] = X[e * H + j] * we;
  }
}

}  // namespace gpumem::ops
