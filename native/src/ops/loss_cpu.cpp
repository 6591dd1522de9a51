// Softmax cross-entropy and accuracy: argument checks, dispatch to the GPU, and the CPU references.
#include <cmath>
#include <cstring>
#include <limits>

#include "gpumem/errors.hpp"
#include "ops.hpp"

namespace gpumem::ops {
namespace {

void check_rows(const std::int32_t* row_index, i64 R, i64 N, i64 C) {
  check::non_negative(R, "R");
  check::non_negative(N, "N");
  check::non_negative(C, "C");
  if (R > 0) check::at_least(C, 1, "C");
  check::fits_i32(C, "C");
  check::fits_i32(N, "N");
  if (row_index == nullptr && R != N)
    check::fail_range("R", "R equal to N (" + std::to_string(N) + ") without rowIndex", std::to_string(R));
}

// The first index of the largest logit (NaNs never win).
i64 argmax(const float* x, i64 C) {
  i64 best = 0;
  for (i64 j = 1; j < C; ++j)
    if (x[j] > x[best]) best = j;
  return best;
}

}  // namespace

void softmax_cross_entropy(bool on_device, stream_handle stream, const float* logits, const std::int32_t* labels,
                           const std::int32_t* row_index, i64 R, i64 N, i64 C, float* dLogits, float* loss_out,
                           std::int32_t* correct_out) {
  check_rows(row_index, R, N, C);
  check::not_null({{loss_out, "lossOut"}, {correct_out, "correctOut"}});
  if (N > 0 && C > 0) check::not_null(dLogits, "dLogits");
  if (R > 0) check::not_null({{logits, "logits"}, {labels, "labels"}});
  GPUMEM_OPS_ON_DEVICE(
      softmax_cross_entropy(stream, logits, labels, row_index, R, N, C, dLogits, loss_out, correct_out));
  if (row_index != nullptr || R == 0)
    if (N > 0 && C > 0) std::memset(dLogits, 0, static_cast<std::size_t>(N * C) * sizeof(float));
  const float inv_r = R > 0 ? 1.0f / static_cast<float>(R) : 0.0f;
  double total = 0.0;
  std::int64_t correct = 0;
  for (i64 r = 0; r < R; ++r) {
    const i64 row = row_index != nullptr ? row_index[r] : r;
    if (row < 0 || row >= N) {
      total = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    const float* x = logits + row * C;
    float* d = dLogits + row * C;
    const i64 label = labels[row];
    const bool valid = label >= 0 && label < C;
    const i64 best = argmax(x, C);
    const float m = x[best];
    float s = 0.0f;
    for (i64 j = 0; j < C; ++j) s += std::exp(x[j] - m);
    for (i64 j = 0; j < C; ++j) d[j] = (std::exp(x[j] - m) / s - (j == label ? 1.0f : 0.0f)) * inv_r;
    if (valid) {
      total += static_cast<double>(std::log(s) + m - x[label]);
      if (best == label) ++correct;
    } else {
      total = std::numeric_limits<double>::quiet_NaN();
    }
  }
  *loss_out = R > 0 ? static_cast<float>(total / static_cast<double>(R)) : 0.0f;
  *correct_out = static_cast<std::int32_t>(correct);
}

void softmax_cross_entropy_bias_grad(bool on_device, stream_handle stream, const float* logits,
                                     const std::int32_t* labels, i64 N, i64 C, float* dLogits, float* dBias,
                                     float* loss_out, std::int32_t* correct_out, const std::int32_t* step) {
  check_rows(nullptr, N, N, C);
  check::at_least(N, 1, "N");
  check::not_null({{logits, "logits"}, {labels, "labels"}, {dLogits, "dLogits"}, {dBias, "dBias"},
                   {loss_out, "lossOut"}, {correct_out, "correctOut"}});
  GPUMEM_OPS_ON_DEVICE(
      softmax_cross_entropy_bias_grad(stream, logits, labels, N, C, dLogits, dBias, loss_out, correct_out, step));
  const i64 slot = step != nullptr ? *step : 0;
  if (slot < 0)
    check::fail_range("step", "non-negative integer", std::to_string(slot));
  softmax_cross_entropy(false, stream, logits, labels, nullptr, N, N, C, dLogits, loss_out + slot, correct_out + slot);
  bias_grad(false, stream, dLogits, dBias, N, C, false);
}

void accuracy(bool on_device, stream_handle stream, const float* logits, const std::int32_t* labels,
              const std::int32_t* row_index, i64 R, i64 N, i64 C, std::int32_t* correct_out) {
  check_rows(row_index, R, N, C);
  check::not_null(correct_out, "correctOut");
  if (R > 0) check::not_null({{logits, "logits"}, {labels, "labels"}});
  GPUMEM_OPS_ON_DEVICE(accuracy(stream, logits, labels, row_index, R, N, C, correct_out));
  std::int64_t correct = 0;
  for (i64 r = 0; r < R; ++r) {
    const i64 row = row_index != nullptr ? row_index[r] : r;
    if (row < 0 || row >= N) continue;
    const i64 label = labels[row];
    if (label >= 0 && label < C && argmax(logits + row * C, C) == label) ++correct;
  }
  *correct_out = static_cast<std::int32_t>(correct);
}

}  // namespace gpumem::ops
