// Layer normalisation and GELU: argument checks, dispatch to the GPU, and the CPU references.
// Layer norm's statistics are in double (two passes: the mean, then the squared deviations), as
// are the backward's row means and column sums, each rounded once.
#include <cmath>
#include <vector>

#include "ops.hpp"

namespace gpumem::ops {
namespace {

constexpr double gelu_k = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double gelu_c = 0.044715;

void check_rows_cols(i64 rows, i64 cols) {
  check::at_least(rows, 1, "rows");
  check::at_least(cols, 1, "cols");
}

}  // namespace

void layer_norm(bool on_device, stream_handle stream, const float* X, const float* gamma, const float* beta, float* Y,
                float* mean, float* rstd, i64 rows, i64 cols, float eps) {
  check_rows_cols(rows, cols);
  if (!(eps >= 0.0f) || std::isinf(eps)) check::fail_range("eps", "a finite number >= 0", std::to_string(eps));
  check::not_null({{X, "X"}, {gamma, "gamma"}, {beta, "beta"}, {Y, "Y"}, {mean, "mean"}, {rstd, "rstd"}});
  GPUMEM_OPS_ON_DEVICE(layer_norm(stream, X, gamma, beta, Y, mean, rstd, rows, cols, eps));
  for (i64 r = 0; r < rows; ++r) {
    const float* x = X + r * cols;
    float* y = Y + r * cols;
    double sum = 0.0;
    for (i64 c = 0; c < cols; ++c) sum += x[c];
    const double mu = sum / static_cast<double>(cols);
    double sq = 0.0;
    for (i64 c = 0; c < cols; ++c) sq += (x[c] - mu) * (x[c] - mu);
    const double rs = 1.0 / std::sqrt(sq / static_cast<double>(cols) + static_cast<double>(eps));
    for (i64 c = 0; c < cols; ++c)  // in place (Y == X): x[c] read before y[c] is written
      y[c] = static_cast<float>((x[c] - mu) * rs * gamma[c] + beta[c]);
    mean[r] = static_cast<float>(mu);
    rstd[r] = static_cast<float>(rs);
  }
}

void layer_norm_backward(bool on_device, stream_handle stream, const float* dY, const float* X, const float* gamma,
                         const float* mean, const float* rstd, float* dX, float* dGamma, float* dBeta, i64 rows,
                         i64 cols, bool accumulate) {
  check_rows_cols(rows, cols);
  check::not_null({{dY, "dY"}, {X, "X"}, {gamma, "gamma"}, {mean, "mean"}, {rstd, "rstd"}, {dX, "dX"},
                   {dGamma, "dGamma"}, {dBeta, "dBeta"}});
  GPUMEM_OPS_ON_DEVICE(
      layer_norm_backward(stream, dY, X, gamma, mean, rstd, dX, dGamma, dBeta, rows, cols, accumulate));
  std::vector<double> sum_gamma(static_cast<std::size_t>(cols), 0.0), sum_beta(static_cast<std::size_t>(cols), 0.0);
  for (i64 r = 0; r < rows; ++r) {
    const float* dy = dY + r * cols;
    const float* x = X + r * cols;
    float* dx = dX + r * cols;
    const double mu = mean[r], rs = rstd[r];
    double mean_g = 0.0, mean_gx = 0.0;  // means over the row of dY*gamma and dY*gamma*xhat
    for (i64 c = 0; c < cols; ++c) {
      const double xhat = (x[c] - mu) * rs, g = static_cast<double>(dy[c]) * gamma[c];
      mean_g += g;
      mean_gx += g * xhat;
    }
    mean_g /= static_cast<double>(cols);
    mean_gx /= static_cast<double>(cols);
    for (i64 c = 0; c < cols; ++c) {  // in place (dX == dY): dy[c] read before dx[c] is written
      const double xhat = (x[c] - mu) * rs, d = dy[c], g = d * gamma[c];
      sum_gamma[c] += d * xhat;
      sum_beta[c] += d;
      dx[c] = static_cast<float>(rs * (g - mean_g - xhat * mean_gx));
    }
  }
  for (i64 c = 0; c < cols; ++c) {
    const float sg = static_cast<float>(sum_gamma[c]), sb = static_cast<float>(sum_beta[c]);
    dGamma[c] = accumulate ? dGamma[c] + sg : sg;
    dBeta[c] = accumulate ? dBeta[c] + sb : sb;
  }
}

void gelu(bool on_device, stream_handle stream, const float* X, float* Y, i64 n) {
  check::at_least(n, 1, "n");
  check::not_null({{X, "X"}, {Y, "Y"}});
  GPUMEM_OPS_ON_DEVICE(gelu(stream, X, Y, n));
  for (i64 i = 0; i < n; ++i) {
    const double x = X[i];
    Y[i] = static_cast<float>(0.5 * x * (1.0 + std::tanh(gelu_k * (x + gelu_c * x * x * x))));
  }
}

void gelu_backward(bool on_device, stream_handle stream, const float* X, const float* dY, float* dX, i64 n) {
  check::at_least(n, 1, "n");
  check::not_null({{X, "X"}, {dY, "dY"}, {dX, "dX"}});
  GPUMEM_OPS_ON_DEVICE(gelu_backward(stream, X, dY, dX, n));
  for (i64 i = 0; i < n; ++i) {
    const double x = X[i];
    const double t = std::tanh(gelu_k * (x + gelu_c * x * x * x));
    const double d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * gelu_k * (1.0 + 3.0 * gelu_c * x * x);
    dX[i] = static_cast<float>(dY[i] * d);
  }
}

}  // namespace gpumem::ops
