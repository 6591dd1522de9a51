// Bias add and its gradient: argument checks, dispatch to the GPU, and the CPU references.
#include <vector>

#include "ops.hpp"

namespace gpumem::ops {

void add_bias(bool on_device, stream_handle stream, float* Y, const float* bias, i64 rows, i64 cols) {
  check::non_negative(rows, "rows");
  check::non_negative(cols, "cols");
  if (rows == 0 || cols == 0) return;
  check::not_null(Y, "Y");
  check::not_null(bias, "bias");
  GPUMEM_OPS_ON_DEVICE(add_bias(stream, Y, bias, rows, cols));
  for (i64 r = 0; r < rows; ++r) {
    float* y = Y + r * cols;
    for (i64 c = 0; c < cols; ++c) y[c] += bias[c];
  }
}

// Column sums accumulated row by row in double (one pass over dY, contiguous inner loop), then
// rounded once: the reference the GPU's chunked float sums are compared with.
void bias_grad(bool on_device, stream_handle stream, const float* dY, float* dBias, i64 rows, i64 cols,
               bool accumulate) {
  check::non_negative(rows, "rows");
  check::non_negative(cols, "cols");
  if (cols == 0) return;
  check::not_null(dBias, "dBias");
  if (rows > 0) check::not_null(dY, "dY");
  GPUMEM_OPS_ON_DEVICE(bias_grad(stream, dY, dBias, rows, cols, accumulate));
  std::vector<double> acc(static_cast<std::size_t>(cols), 0.0);
  for (i64 r = 0; r < rows; ++r) {
    const float* y = dY + r * cols;
    for (i64 c = 0; c < cols; ++c) acc[c] += y[c];
  }
  for (i64 c = 0; c < cols; ++c) {
    const float s = static_cast<float>(acc[c]);
    dBias[c] = accumulate ? dBias[c] + s : s;
  }
}

}  // namespace gpumem::ops
