// Attention's layout changes and causal softmax: argument checks, dispatch to the GPU, and the CPU
// references. The softmaxes work on one query row at a time (row i of each TxT matrix sees keys
// 0..i); the exponentials and sums are in double, rounded once per output.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops.hpp"

namespace gpumem::ops {
namespace {

void check_heads(i64 ldx, i64 B, i64 T, i64 H, i64 D) {
  check::at_least(B, 1, "B");
  check::at_least(T, 1, "T");
  check::at_least(H, 1, "H");
  check::at_least(D, 1, "D");
  check::at_least(ldx, H * D, "ldx");
}

// Calls row(x, y) for each head row of D values: x its offset in the [B, T, ldx] layout (head h at
// columns h*D..), y its offset in the [B*H, T, D] one. Both layout changes walk this map, one each way.
template <class Row>
void for_each_head_row(i64 ldx, i64 B, i64 T, i64 H, i64 D, Row&& row) {
  for (i64 b = 0; b < B; ++b)
    for (i64 h = 0; h < H; ++h)
      for (i64 t = 0; t < T; ++t) row((b * T + t) * ldx + h * D, ((b * H + h) * T + t) * D);
}

void check_softmax(i64 rows, i64 T) {
  check::at_least(rows, 1, "rows");
  check::at_least(T, 1, "T");
}

}  // namespace

void heads_to_batch(bool on_device, stream_handle stream, const float* X, i64 ldx, float* Y, i64 B, i64 T, i64 H,
                    i64 D) {
  check_heads(ldx, B, T, H, D);
  check::not_null({{X, "X"}, {Y, "Y"}});
  GPUMEM_OPS_ON_DEVICE(heads_to_batch(stream, X, ldx, Y, B, T, H, D));
  for_each_head_row(ldx, B, T, H, D, [&](i64 x, i64 y) { std::copy(X + x, X + x + D, Y + y); });
}

void batch_to_heads(bool on_device, stream_handle stream, const float* Y, float* X, i64 ldx, i64 B, i64 T, i64 H,
                    i64 D) {
  check_heads(ldx, B, T, H, D);
  check::not_null({{Y, "Y"}, {X, "X"}});
  GPUMEM_OPS_ON_DEVICE(batch_to_heads(stream, Y, X, ldx, B, T, H, D));
  for_each_head_row(ldx, B, T, H, D, [&](i64 x, i64 y) { std::copy(Y + y, Y + y + D, X + x); });
}

void causal_softmax(bool on_device, stream_handle stream, const float* S, float* P, i64 rows, i64 T, float scale) {
  check_softmax(rows, T);
  check::not_null({{S, "S"}, {P, "P"}});
  GPUMEM_OPS_ON_DEVICE(causal_softmax(stream, S, P, rows, T, scale));
  for (i64 q = 0; q < rows * T; ++q) {
    const i64 i = q % T;  // the query's position: keys 0..i
    const float* s = S + q * T;
    float* p = P + q * T;
    double m = -std::numeric_limits<double>::infinity();
    for (i64 j = 0; j <= i; ++j) m = std::max(m, static_cast<double>(scale * s[j]));
    double sum = 0.0;
    for (i64 j = 0; j <= i; ++j) sum += std::exp(static_cast<double>(scale * s[j]) - m);
    // In place (P == S): s[j] is read before p[j] is written, for each j in turn.
    for (i64 j = 0; j < T; ++j)
      p[j] = j <= i ? static_cast<float>(std::exp(static_cast<double>(scale * s[j]) - m) / sum) : 0.0f;
  }
}

void causal_softmax_backward(bool on_device, stream_handle stream, const float* P, const float* dP, float* dS, i64 rows,
                             i64 T, float scale) {
  check_softmax(rows, T);
  check::not_null({{P, "P"}, {dP, "dP"}, {dS, "dS"}});
  GPUMEM_OPS_ON_DEVICE(causal_softmax_backward(stream, P, dP, dS, rows, T, scale));
  for (i64 q = 0; q < rows * T; ++q) {
    const i64 i = q % T;
    const float* p = P + q * T;
    const float* dp = dP + q * T;
    float* ds = dS + q * T;
    double dot = 0.0;
    for (i64 j = 0; j <= i; ++j) dot += static_cast<double>(p[j]) * dp[j];
    for (i64 j = 0; j < T; ++j)  // in place (dS == dP): dp[j] read before ds[j] is written
      ds[j] = j <= i ? static_cast<float>(static_cast<double>(scale) * p[j] * (dp[j] - dot)) : 0.0f;
  }
}

}  // namespace gpumem::ops
