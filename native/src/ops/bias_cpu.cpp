// Bias add and its gradient: argument checks, dispatch to the GPU, and the CPU references.
#include <algorithm>
#include <vector>

#include "ops.hpp"

namespace gpumem::ops {

namespace {
void add_bias_impl(bool on_device, stream_handle stream, float* Y, const float* bias, i64 rows, i64 cols, bool relu) {
  check::non_negative(rows, "rows");
  check::non_negative(cols, "cols");
  if (rows == 0 || cols == 0) return;
  check::not_null({{Y, "Y"}, {bias, "bias"}});
  GPUMEM_OPS_ON_DEVICE(add_bias(stream, Y, bias, rows, cols, relu));
  for (i64 r = 0; r < rows; ++r) {
    float* y = Y + r * cols;
    for (i64 c = 0; c < cols; ++c) {
      const float v = y[c] + bias[c];
      y[c] = relu ? std::max(v, 0.0f) : v;
    }
  }
}
}  // namespace

void add_bias(bool on_device, stream_handle stream, float* Y, const float* bias, i64 rows, i64 cols) {
  add_bias_impl(on_device, stream, Y, bias, rows, cols, false);
}

void add_bias_relu(bool on_device, stream_handle stream, float* Y, const float* bias, i64 rows, i64 cols) {
  add_bias_impl(on_device, stream, Y, bias, rows, cols, true);
}

// Column sums accumulated row by row in double (one pass over dY, contiguous inner loop), then
// rounded once: the reference the GPU's chunked float sums are compared with.
namespace {
// relu_out: when not null, dY is masked by relu_out > 0 in place before it is summed.
void bias_grad_impl(bool on_device, stream_handle stream, float* dY, const float* relu_out, float* dBias, i64 rows,
                    i64 cols, bool accumulate) {
  check::non_negative(rows, "rows");
  check::non_negative(cols, "cols");
  if (cols == 0) return;
  check::not_null(dBias, "dBias");
  if (rows > 0) check::not_null(dY, "dY");
  GPUMEM_OPS_ON_DEVICE(bias_grad(stream, dY, relu_out, dBias, rows, cols, accumulate));
  std::vector<double> acc(static_cast<std::size_t>(cols), 0.0);
  for (i64 r = 0; r < rows; ++r) {
    float* y = dY + r * cols;
    for (i64 c = 0; c < cols; ++c) {
      if (relu_out != nullptr && !(relu_out[r * cols + c] > 0.0f)) y[c] = 0.0f;
      acc[c] += y[c];
    }
  }
  for (i64 c = 0; c < cols; ++c) {
    const float s = static_cast<float>(acc[c]);
    dBias[c] = accumulate ? dBias[c] + s : s;
  }
}
}  // namespace

void bias_grad(bool on_device, stream_handle stream, const float* dY, float* dBias, i64 rows, i64 cols,
               bool accumulate) {
  // read only: without a mask nothing is written to dY
  bias_grad_impl(on_device, stream, const_cast<float*>(dY), nullptr, dBias, rows, cols, accumulate);
}

void relu_bias_grad(bool on_device, stream_handle stream, const float* Y, float* dY, float* dBias, i64 rows, i64 cols) {
  if (rows > 0 && cols > 0) check::not_null(Y, "Y");
  bias_grad_impl(on_device, stream, dY, Y, dBias, rows, cols, false);
}

}  // namespace gpumem::ops
