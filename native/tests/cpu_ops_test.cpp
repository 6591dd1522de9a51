// The trainer's CPU ops (src/kernels/*_cpu.cpp, declared in ops.hpp) on small random inputs,
// against plain reference loops (in double where the op sums) or invariants. Every buffer is a
// std::vector of exactly the size the op may touch, so the sanitizer builds see any read or write
// out of bounds, any uninitialised-size arithmetic and any undefined behaviour in the kernels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "edge_norm.hpp"
#include "gpumem/errors.hpp"
#include "ops.hpp"
#include "rng.hpp"

using namespace gpumem;
using gpumem::ops::i64;

namespace {

constexpr bool cpu = false;  // on_device
constexpr stream_handle no_stream = nullptr;

std::mt19937& gen() {
  static std::mt19937 g(12345);
  return g;
}

std::vector<float> random_floats(std::size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen());
  return v;
}

std::vector<std::int32_t> random_ints(std::size_t n, std::int32_t lo, std::int32_t hi) {
  std::uniform_int_distribution<std::int32_t> d(lo, hi);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = d(gen());
  return v;
}

// |got - want| within a tolerance relative to `scale` (e.g. the sum of the absolute terms).
bool close(double got, double want, double scale, double rel = 1e-5) {
  return std::fabs(got - want) <= rel * scale + 1e-6;
}

// Element (r, c) of op(X) where X is stored row-major as [rows, cols] (or [cols, rows] when transposed).
float at(const std::vector<float>& X, bool trans, i64 r, i64 c, i64 rows, i64 cols) {
  return trans ? X[c * rows + r] : X[r * cols + c];
}

// A random graph's edge list: E edges among N nodes.
struct edges {
  std::vector<std::int32_t> rows, cols;
};
edges random_edges(i64 N, i64 E) {
  return {random_ints(E, 0, static_cast<std::int32_t>(N - 1)), random_ints(E, 0, static_cast<std::int32_t>(N - 1))};
}

struct csr {
  std::vector<std::int32_t> rowptr, col;
};
csr build_csr(const edges& g, i64 N) {
  const i64 E = static_cast<i64>(g.rows.size());
  csr m{std::vector<std::int32_t>(N + 1), std::vector<std::int32_t>(E)};
  ops::csr_build(cpu, no_stream, g.rows.data(), g.cols.data(), E, N, m.rowptr.data(), m.col.data(), nullptr, 0);
  return m;
}

}  // namespace

TEST_CASE("gemm matches a double reference for every transpose") {
  const i64 shapes[][3] = {{1, 1, 1}, {5, 3, 7}, {4, 8, 4}, {9, 300, 13}, {7, 5, 260}, {33, 17, 0}};
  for (const auto& shape : shapes) {
    const i64 M = shape[0], N = shape[1], K = shape[2];
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      for (const float beta : {0.0f, 1.0f, 0.5f}) {
        const float alpha = 0.75f;
        const auto A = random_floats(static_cast<std::size_t>(M * K));
        const auto B = random_floats(static_cast<std::size_t>(K * N));
        auto C = random_floats(static_cast<std::size_t>(M * N));
        const auto C0 = C;
        if (beta == 0.0f) std::fill(C.begin(), C.end(), std::numeric_limits<float>::quiet_NaN());  // not read
        ops::gemm(cpu, no_stream, ta, tb, M, N, K, alpha, A.data(), B.data(), beta, C.data());
        int bad = 0;
        for (i64 i = 0; i < M; ++i) {
          for (i64 j = 0; j < N; ++j) {
            double want = beta == 0.0f ? 0.0 : static_cast<double>(beta) * C0[i * N + j];
            double scale = std::fabs(want);
            for (i64 k = 0; k < K; ++k) {
              const double term = static_cast<double>(at(A, ta, i, k, M, K)) * at(B, tb, k, j, K, N);
              want += alpha * term;
              scale += std::fabs(alpha * term);
            }
            if (!close(C[i * N + j], want, scale)) ++bad;
          }
        }
        INFO("gemm " << M << "x" << N << "x" << K << " ta=" << ta << " tb=" << tb << " beta=" << beta << ": " << bad
                     << " wrong elements");
        CHECK_EQ(bad, 0);
      }
    }
  }
  CHECK_THROWS_AS(ops::gemm(cpu, no_stream, false, false, -1, 2, 2, 1.0f, nullptr, nullptr, 0.0f, nullptr),
                  invalid_argument);
  std::vector<float> C(4);
  CHECK_THROWS_AS(ops::gemm(cpu, no_stream, false, false, 2, 2, 2, 1.0f, nullptr, C.data(), 0.0f, C.data()),
                  invalid_argument);
  ops::gemm(cpu, no_stream, false, false, 0, 5, 5, 1.0f, nullptr, nullptr, 0.0f, nullptr);  // empty: nothing touched
}

TEST_CASE("bias ops match reference loops") {
  const i64 rows = 37, cols = 19;
  const auto Y0 = random_floats(rows * cols);
  const auto bias = random_floats(cols);
  auto Y = Y0;
  ops::add_bias(cpu, no_stream, Y.data(), bias.data(), rows, cols);
  for (i64 r = 0; r < rows; ++r)
    for (i64 c = 0; c < cols; ++c) CHECK_EQ(Y[r * cols + c], Y0[r * cols + c] + bias[c]);
  Y = Y0;
  ops::add_bias_relu(cpu, no_stream, Y.data(), bias.data(), rows, cols);
  for (i64 r = 0; r < rows; ++r)
    for (i64 c = 0; c < cols; ++c) {
      const float want = std::max(Y0[r * cols + c] + bias[c], 0.0f);  // std::max returns a reference
      CHECK_EQ(Y[r * cols + c], want);
    }

  const auto dY = random_floats(rows * cols);
  std::vector<float> dBias(cols);
  ops::bias_grad(cpu, no_stream, dY.data(), dBias.data(), rows, cols, false);
  std::vector<double> sums(cols, 0.0);
  for (i64 r = 0; r < rows; ++r)
    for (i64 c = 0; c < cols; ++c) sums[c] += dY[r * cols + c];
  for (i64 c = 0; c < cols; ++c) CHECK(close(dBias[c], sums[c], rows));
  const auto before = dBias;
  ops::bias_grad(cpu, no_stream, dY.data(), dBias.data(), rows, cols, true);  // accumulates
  for (i64 c = 0; c < cols; ++c) CHECK(close(dBias[c], before[c] + sums[c], rows));

  // relu_bias_grad: dY masked in place by Y > 0, then summed.
  auto masked = dY;
  ops::relu_bias_grad(cpu, no_stream, Y.data(), masked.data(), dBias.data(), rows, cols);
  std::fill(sums.begin(), sums.end(), 0.0);
  for (i64 i = 0; i < rows * cols; ++i) {
    const float want = Y[i] > 0.0f ? dY[i] : 0.0f;
    CHECK_EQ(masked[i], want);
    sums[i % cols] += want;
  }
  for (i64 c = 0; c < cols; ++c) CHECK(close(dBias[c], sums[c], rows));

  ops::bias_grad(cpu, no_stream, nullptr, dBias.data(), 0, cols, false);  // no rows: zeros
  for (float v : dBias) CHECK_EQ(v, 0.0f);
  CHECK_THROWS_AS(ops::add_bias(cpu, no_stream, Y.data(), bias.data(), -1, cols), invalid_argument);
  CHECK_THROWS_AS(ops::add_bias(cpu, no_stream, nullptr, bias.data(), rows, cols), invalid_argument);
}

TEST_CASE("relu and dropout forward and backward") {
  const i64 n = 1001;
  const auto X = random_floats(n);
  std::vector<float> Y(n), dX(n);
  ops::relu(cpu, no_stream, X.data(), Y.data(), n);
  for (i64 i = 0; i < n; ++i) CHECK_EQ(Y[i], X[i] > 0.0f ? X[i] : 0.0f);
  const auto dY = random_floats(n);
  ops::relu_backward(cpu, no_stream, Y.data(), dY.data(), dX.data(), n);
  for (i64 i = 0; i < n; ++i) CHECK_EQ(dX[i], Y[i] > 0.0f ? dY[i] : 0.0f);

  const double p = 0.3;
  const float s = static_cast<float>(1.0 / (1.0 - p));
  std::vector<std::uint8_t> mask(n);
  ops::dropout(cpu, no_stream, X.data(), Y.data(), mask.data(), n, p, 42, 1000);
  const std::uint64_t key = ops::rng::key_of(42);
  i64 kept = 0;
  for (i64 i = 0; i < n; ++i) {
    const bool keep = ops::rng::uniform24(ops::rng::bits(key, 1000 + static_cast<std::uint64_t>(i))) >= p;
    CHECK_EQ(mask[i], keep ? 1 : 0);
    CHECK_EQ(Y[i], keep ? X[i] * s : 0.0f);
    kept += keep;
  }
  CHECK(kept > n * 0.6);  // about 1 - p of them
  CHECK(kept < n * 0.8);
  // Counter-based: the same elements at another offset are a shifted window of the same stream.
  std::vector<float> Y2(n - 10);
  std::vector<std::uint8_t> mask2(n - 10);
  ops::dropout(cpu, no_stream, X.data() + 10, Y2.data(), mask2.data(), n - 10, p, 42, 1010);
  CHECK(std::equal(mask2.begin(), mask2.end(), mask.begin() + 10));
  ops::dropout_backward(cpu, no_stream, dY.data(), mask.data(), dX.data(), n, p);
  for (i64 i = 0; i < n; ++i) CHECK_EQ(dX[i], mask[i] ? dY[i] * s : 0.0f);

  CHECK_THROWS_AS(ops::dropout(cpu, no_stream, X.data(), Y.data(), mask.data(), n, 1.0, 1, 0), invalid_argument);
  CHECK_THROWS_AS(ops::dropout(cpu, no_stream, X.data(), Y.data(), mask.data(), n, -0.1, 1, 0), invalid_argument);
  CHECK_THROWS_AS(ops::relu(cpu, no_stream, X.data(), Y.data(), -5), invalid_argument);
}

TEST_CASE("softmax cross entropy and accuracy match a double reference") {
  const i64 N = 50, C = 7;
  auto logits = random_floats(N * C, -3.0f, 3.0f);
  auto labels = random_ints(N, 0, static_cast<std::int32_t>(C - 1));
  // Reference per row: softmax, loss, gradient (scaled by 1/R), argmax.
  auto reference = [&](const std::vector<std::int32_t>& rows, std::vector<double>& grad, double& loss, int& correct) {
    const double R = static_cast<double>(rows.size());
    grad.assign(N * C, 0.0);
    loss = 0.0;
    correct = 0;
    for (std::int32_t row : rows) {
      const float* x = logits.data() + row * C;
      const i64 best = std::max_element(x, x + C) - x;
      double m = x[best], sum = 0.0;
      for (i64 j = 0; j < C; ++j) sum += std::exp(x[j] - m);
      for (i64 j = 0; j < C; ++j) grad[row * C + j] = (std::exp(x[j] - m) / sum - (j == labels[row])) / R;
      loss += std::log(sum) + m - x[labels[row]];
      correct += best == labels[row];
    }
    loss /= R;
  };

  std::vector<float> dLogits(N * C), loss(1);
  std::vector<std::int32_t> correct(1), acc(1);
  std::vector<double> grad;
  double want_loss = 0.0;
  int want_correct = 0;

  std::vector<std::int32_t> all(N);
  std::iota(all.begin(), all.end(), 0);
  ops::softmax_cross_entropy(cpu, no_stream, logits.data(), labels.data(), nullptr, N, N, C, dLogits.data(),
                             loss.data(), correct.data());
  reference(all, grad, want_loss, want_correct);
  CHECK(close(loss[0], want_loss, std::fabs(want_loss)));
  CHECK_EQ(correct[0], want_correct);
  for (i64 i = 0; i < N * C; ++i) CHECK(close(dLogits[i], grad[i], 1.0));
  ops::accuracy(cpu, no_stream, logits.data(), labels.data(), nullptr, N, N, C, acc.data());
  CHECK_EQ(acc[0], want_correct);

  // A subset of rows: the other rows' gradients are zero.
  const std::vector<std::int32_t> subset = {3, 17, 17, 49, 0};
  std::fill(dLogits.begin(), dLogits.end(), 99.0f);
  ops::softmax_cross_entropy(cpu, no_stream, logits.data(), labels.data(), subset.data(), 5, N, C, dLogits.data(),
                             loss.data(), correct.data());
  std::vector<std::int32_t> distinct = {0, 3, 17, 49};
  reference(distinct, grad, want_loss, want_correct);
  for (i64 r = 0; r < N; ++r) {
    const bool chosen = std::find(distinct.begin(), distinct.end(), r) != distinct.end();
    for (i64 j = 0; j < C; ++j) {
      // Row 17 appears twice: its gradient is written (not added) with the 1/R of the call, R = 5.
      const double want = chosen ? grad[r * C + j] * 4.0 / 5.0 : 0.0;
      CHECK(close(dLogits[r * C + j], want, 1.0));
    }
  }
  ops::accuracy(cpu, no_stream, logits.data(), labels.data(), subset.data(), 5, N, C, acc.data());
  CHECK_EQ(acc[0], correct[0]);

  // A label out of range or a row out of range: NaN loss, never written through.
  labels[5] = static_cast<std::int32_t>(C);
  ops::softmax_cross_entropy(cpu, no_stream, logits.data(), labels.data(), nullptr, N, N, C, dLogits.data(),
                             loss.data(), correct.data());
  CHECK(std::isnan(loss[0]));
  const std::vector<std::int32_t> outside = {1, static_cast<std::int32_t>(N)};
  ops::softmax_cross_entropy(cpu, no_stream, logits.data(), labels.data(), outside.data(), 2, N, C, dLogits.data(),
                             loss.data(), correct.data());
  CHECK(std::isnan(loss[0]));
  ops::softmax_cross_entropy(cpu, no_stream, logits.data(), labels.data(), all.data(), 0, N, C, dLogits.data(),
                             loss.data(), correct.data());
  CHECK_EQ(loss[0], 0.0f);
  CHECK_EQ(correct[0], 0);
  for (float v : dLogits) CHECK_EQ(v, 0.0f);
  CHECK_THROWS_AS(ops::softmax_cross_entropy(cpu, no_stream, logits.data(), labels.data(), nullptr, 3, N, C,
                                             dLogits.data(), loss.data(), correct.data()),
                  invalid_argument);  // R != N without a row index
}

TEST_CASE("fused training step ops match the ops they fuse") {
  // gather_batch: rows of X and their labels at index[step * rows + r].
  const i64 N = 20, H = 6, rows = 4;
  const auto X = random_floats(N * H);
  const auto labels = random_ints(N, 0, 9);
  const auto index = random_ints(3 * rows, 0, static_cast<std::int32_t>(N - 1));
  std::vector<float> x(rows * H);
  std::vector<std::int32_t> y(rows);
  for (std::int32_t step = 0; step < 3; ++step) {
    ops::gather_batch(cpu, no_stream, X.data(), labels.data(), index.data(), &step, rows, H, x.data(), y.data());
    for (i64 r = 0; r < rows; ++r) {
      const std::int32_t i = index[step * rows + r];
      CHECK_EQ(y[r], labels[i]);
      CHECK(std::equal(x.begin() + r * H, x.begin() + (r + 1) * H, X.begin() + i * H));
    }
  }
  ops::gather_batch(cpu, no_stream, X.data(), labels.data(), index.data(), nullptr, rows, H, x.data(), y.data());
  CHECK_EQ(y[0], labels[index[0]]);  // no step counter: the first rows
  const std::int32_t negative = -1;
  CHECK_THROWS_AS(
      ops::gather_batch(cpu, no_stream, X.data(), labels.data(), index.data(), &negative, rows, H, x.data(), y.data()),
      invalid_argument);

  // softmax_cross_entropy_bias_grad: bit-identical to the loss then bias_grad, into slot *step.
  const i64 R = 16, C = 5;
  const auto logits = random_floats(R * C, -2.0f, 2.0f);
  const auto targets = random_ints(R, 0, static_cast<std::int32_t>(C - 1));
  std::vector<float> d1(R * C), d2(R * C), b1(C), b2(C), loss1(1), loss2(3, -1.0f);
  std::vector<std::int32_t> c1(1), c2(3, -1);
  ops::softmax_cross_entropy(cpu, no_stream, logits.data(), targets.data(), nullptr, R, R, C, d1.data(), loss1.data(),
                             c1.data());
  ops::bias_grad(cpu, no_stream, d1.data(), b1.data(), R, C, false);
  const std::int32_t slot = 2;
  ops::softmax_cross_entropy_bias_grad(cpu, no_stream, logits.data(), targets.data(), R, C, d2.data(), b2.data(),
                                       loss2.data(), c2.data(), &slot);
  CHECK(d1 == d2);
  CHECK(b1 == b2);
  CHECK_EQ(loss2[2], loss1[0]);
  CHECK_EQ(c2[2], c1[0]);
  CHECK_EQ(loss2[0], -1.0f);  // other slots untouched
  CHECK_EQ(c2[1], -1);

  // add_i32 advances a step counter (wrapping like the GPU's); stream_wait orders nothing on the CPU.
  std::int32_t counter = 41;
  ops::add_i32(cpu, no_stream, &counter, 1);
  CHECK_EQ(counter, 42);
  counter = std::numeric_limits<std::int32_t>::max();
  ops::add_i32(cpu, no_stream, &counter, 1);
  CHECK_EQ(counter, std::numeric_limits<std::int32_t>::min());
  ops::stream_wait(cpu, no_stream, no_stream);
  CHECK_THROWS_AS(ops::add_i32(cpu, no_stream, nullptr, 1), invalid_argument);
}

TEST_CASE("optimisers match reference loops") {
  const i64 n = 513;
  const auto W0 = random_floats(n), G = random_floats(n);
  auto W = W0;
  ops::sgd(cpu, no_stream, W.data(), G.data(), n, 0.1f);
  for (i64 i = 0; i < n; ++i) CHECK_EQ(W[i], W0[i] - 0.1f * G[i]);

  // Adam, three steps, against the textbook formula in double.
  W = W0;
  std::vector<float> M(n, 0.0f), V(n, 0.0f);
  std::vector<double> w(W0.begin(), W0.end()), m(n, 0.0), v(n, 0.0);
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  for (i64 step = 1; step <= 3; ++step) {
    ops::adam(cpu, no_stream, W.data(), G.data(), M.data(), V.data(), n, 0.01f, 0.9f, 0.999f, 1e-8f, step);
    for (i64 i = 0; i < n; ++i) {
      const double g = G[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double mhat = m[i] / (1 - std::pow(b1, step)), vhat = v[i] / (1 - std::pow(b2, step));
      w[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
  for (i64 i = 0; i < n; ++i) {
    CHECK(close(W[i], w[i], 1.0, 1e-5));
    CHECK(close(M[i], m[i], 1.0, 1e-5));
    CHECK(close(V[i], v[i], 1.0, 1e-5));
  }
  CHECK_THROWS_AS(ops::adam(cpu, no_stream, W.data(), G.data(), M.data(), V.data(), n, 0.01f, 0.9f, 0.999f, 1e-8f, 0),
                  invalid_argument);
  CHECK_THROWS_AS(ops::adam(cpu, no_stream, W.data(), G.data(), M.data(), V.data(), n, 0.01f, 1.0f, 0.999f, 1e-8f, 1),
                  invalid_argument);
}

TEST_CASE("gather scatter scale rows and spmm") {
  const i64 N = 40, E = 150, H = 9;
  const auto X = random_floats(N * H);
  const auto index = random_ints(E, 0, static_cast<std::int32_t>(N - 1));
  std::vector<float> gathered(E * H);
  ops::gather_rows(cpu, no_stream, X.data(), index.data(), gathered.data(), E, H);
  for (i64 e = 0; e < E; ++e)
    for (i64 h = 0; h < H; ++h) CHECK_EQ(gathered[e * H + h], X[index[e] * H + h]);

  // scatter_add_rows adds in edge order: the same order as this loop, so the floats agree exactly.
  const auto src = random_floats(E * H);
  std::vector<float> out(N * H, 0.5f), want(N * H, 0.5f);
  ops::scatter_add_rows(cpu, no_stream, src.data(), index.data(), out.data(), E, H);
  for (i64 e = 0; e < E; ++e)
    for (i64 h = 0; h < H; ++h) want[index[e] * H + h] += src[e * H + h];
  CHECK(out == want);

  const auto w = random_floats(E);
  std::vector<float> scaled(E * H);
  ops::scale_rows(cpu, no_stream, src.data(), w.data(), scaled.data(), E, H);
  for (i64 e = 0; e < E; ++e)
    for (i64 h = 0; h < H; ++h) CHECK_EQ(scaled[e * H + h], src[e * H + h] * w[e]);
  auto in_place = src;
  ops::scale_rows(cpu, no_stream, in_place.data(), w.data(), in_place.data(), E, H);
  CHECK(in_place == scaled);

  // spmm over a CSR built from random edges, against a sum over the edge list in double.
  const edges g = random_edges(N, E);
  const csr m = build_csr(g, N);
  const auto val = random_floats(E);
  std::vector<float> y(N * H);
  ops::spmm(cpu, no_stream, m.rowptr.data(), m.col.data(), val.data(), X.data(), y.data(), N, H);
  std::vector<double> ref(N * H, 0.0), scale(N * H, 0.0);
  for (i64 r = 0; r < N; ++r)
    for (i64 e = m.rowptr[r]; e < m.rowptr[r + 1]; ++e)
      for (i64 h = 0; h < H; ++h) {
        const double t = static_cast<double>(val[e]) * X[m.col[e] * H + h];
        ref[r * H + h] += t;
        scale[r * H + h] += std::fabs(t);
      }
  for (i64 i = 0; i < N * H; ++i) CHECK(close(y[i], ref[i], scale[i]));

  std::vector<std::int32_t> bad = index;
  bad[7] = -1;
  CHECK_THROWS_AS(ops::gather_rows(cpu, no_stream, X.data(), bad.data(), gathered.data(), E, H), invalid_argument);
  CHECK_THROWS_AS(ops::scatter_add_rows(cpu, no_stream, src.data(), bad.data(), out.data(), E, H), invalid_argument);
}

TEST_CASE("csr build degrees and edge norms") {
  const i64 N = 30, E = 200;
  const edges g = random_edges(N, E);
  CHECK_EQ(ops::csr_build_temp_bytes(cpu, E, N), 0u);
  const csr m = build_csr(g, N);
  // rowptr: prefix sums of the row counts; each row's columns in edge-list order (a stable sort).
  CHECK_EQ(m.rowptr[0], 0);
  for (i64 r = 0; r < N; ++r) {
    std::vector<std::int32_t> want;
    for (i64 e = 0; e < E; ++e)
      if (g.rows[e] == r) want.push_back(g.cols[e]);
    CHECK_EQ(static_cast<std::size_t>(m.rowptr[r + 1] - m.rowptr[r]), want.size());
    CHECK(std::equal(want.begin(), want.end(), m.col.begin() + m.rowptr[r]));
  }
  CHECK_EQ(m.rowptr[N], static_cast<std::int32_t>(E));

  std::vector<float> deg(N);
  ops::row_degrees(cpu, no_stream, m.rowptr.data(), N, deg.data());
  for (i64 r = 0; r < N; ++r) CHECK_EQ(deg[r], static_cast<float>(m.rowptr[r + 1] - m.rowptr[r]));

  std::vector<float> val(E), w(E);
  for (int mode = 0; mode <= 2; ++mode) {
    ops::edge_norm(cpu, no_stream, m.rowptr.data(), m.col.data(), N, deg.data(), mode, val.data());
    for (i64 r = 0; r < N; ++r)
      for (i64 e = m.rowptr[r]; e < m.rowptr[r + 1]; ++e) {
        const double dr = deg[r], dc = deg[m.col[e]];
        const double d = mode == 0 ? dr * dc : mode == 1 ? dr : dc;
        const double want = d == 0.0 ? 0.0 : mode == 0 ? 1.0 / std::sqrt(d) : 1.0 / d;
        CHECK(close(val[e], want, want));
      }
    // The edge-list form: deg[dst] is the row's degree, deg[src] the column's.
    ops::edge_norm_list(cpu, no_stream, g.cols.data(), g.rows.data(), deg.data(), E, mode, w.data());
    for (i64 e = 0; e < E; ++e) CHECK_EQ(w[e], ops::edge_norm_value(deg[g.rows[e]], deg[g.cols[e]], mode));
  }
  CHECK_THROWS_AS(ops::edge_norm(cpu, no_stream, m.rowptr.data(), m.col.data(), N, deg.data(), 3, val.data()),
                  invalid_argument);

  edges out_of_range = g;
  out_of_range.rows[3] = static_cast<std::int32_t>(N);
  std::vector<std::int32_t> rowptr(N + 1), col(E);
  CHECK_THROWS_AS(ops::csr_build(cpu, no_stream, out_of_range.rows.data(), out_of_range.cols.data(), E, N,
                                 rowptr.data(), col.data(), nullptr, 0),
                  invalid_argument);
  // No edges: every row empty.
  ops::csr_build(cpu, no_stream, nullptr, nullptr, 0, N, rowptr.data(), nullptr, nullptr, 0);
  for (std::int32_t v : rowptr) CHECK_EQ(v, 0);
}

TEST_CASE("random generators are in range deterministic and counter based") {
  const i64 n = 20000;
  std::vector<std::int32_t> ints(n), ints2(n - 100);
  ops::random_ints(cpu, no_stream, ints.data(), n, 10, 7, 0);
  std::vector<int> counts(10, 0);
  for (std::int32_t v : ints) {
    CHECK((v >= 0 && v < 10));
    if (v >= 0 && v < 10) ++counts[v];
  }
  for (int c : counts) {
    CHECK(c > n / 10 * 0.9);
    CHECK(c < n / 10 * 1.1);
  }
  ops::random_ints(cpu, no_stream, ints2.data(), n - 100, 10, 7, 100);
  CHECK(std::equal(ints2.begin(), ints2.end(), ints.begin() + 100));
  ops::random_ints(cpu, no_stream, ints2.data(), n - 100, 10, 8, 100);  // another seed, another stream
  CHECK(!std::equal(ints2.begin(), ints2.end(), ints.begin() + 100));
  ops::random_ints(cpu, no_stream, ints.data(), n, i64{1} << 31, 7, 0);
  for (std::int32_t v : ints) CHECK(v >= 0);
  CHECK_THROWS_AS(ops::random_ints(cpu, no_stream, ints.data(), n, 0, 7, 0), invalid_argument);
  CHECK_THROWS_AS(ops::random_ints(cpu, no_stream, ints.data(), n, (i64{1} << 31) + 1, 7, 0), invalid_argument);

  std::vector<float> normal(n), again(n);
  ops::random_normal(cpu, no_stream, normal.data(), n, 3, 0);
  ops::random_normal(cpu, no_stream, again.data(), n, 3, 0);
  CHECK(normal == again);
  double mean = 0.0, var = 0.0;
  for (float v : normal) {
    CHECK(std::isfinite(v));
    mean += v;
  }
  mean /= n;
  for (float v : normal) var += (v - mean) * (v - mean);
  var /= n;
  CHECK(std::fabs(mean) < 0.05);
  CHECK(std::fabs(var - 1.0) < 0.05);

  std::vector<float> uniform(n);
  ops::random_uniform(cpu, no_stream, uniform.data(), n, -2.0f, 3.0f, 9, 5);
  double sum = 0.0;
  for (float v : uniform) {
    CHECK((v >= -2.0f && v <= 3.0f));
    sum += v;
  }
  CHECK(std::fabs(sum / n - 0.5) < 0.05);
  CHECK_THROWS_AS(ops::random_uniform(cpu, no_stream, uniform.data(), n, 1.0f, 0.0f, 9, 5), invalid_argument);
}

TEST_CASE("fill and scale") {
  const i64 n = 777;
  std::vector<float> f(n);
  ops::fill_f32(cpu, no_stream, f.data(), n, 2.5f);
  for (float v : f) CHECK_EQ(v, 2.5f);
  std::vector<std::int32_t> i32(n);
  ops::fill_i32(cpu, no_stream, i32.data(), n, -4);
  for (std::int32_t v : i32) CHECK_EQ(v, -4);
  const auto X = random_floats(n);
  auto Y = random_floats(n);
  ops::scale(cpu, no_stream, -0.5f, X.data(), Y.data(), n);
  for (i64 i = 0; i < n; ++i) CHECK_EQ(Y[i], -0.5f * X[i]);
  CHECK_THROWS_AS(ops::fill_f32(cpu, no_stream, nullptr, n, 1.0f), invalid_argument);
  ops::fill_f32(cpu, no_stream, nullptr, 0, 1.0f);  // nothing to write: no pointer needed
}

#ifndef GPUMEM_WITH_CUDA
TEST_CASE("on device in a build without cuda is invalid state") {
  std::vector<float> f(4);
  CHECK_THROWS_AS(ops::fill_f32(true, no_stream, f.data(), 4, 1.0f), invalid_state);
  CHECK_THROWS_AS(ops::gemm(true, no_stream, false, false, 2, 2, 1, 1.0f, f.data(), f.data(), 0.0f, f.data()),
                  invalid_state);
  CHECK_EQ(f[0], 0.0f);  // nothing ran
}
#endif
