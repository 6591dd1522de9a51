// The transformer ops' CPU references (ops.hpp: gemm_strided_batched, heads_to_batch and
// batch_to_heads, causal_softmax, layer_norm, gelu, embedding and their backwards) against plain
// loops in double, and each backward against central differences of its forward. Every buffer is a
// std::vector of exactly the size the op may touch, so the sanitizer builds see any access out of
// bounds.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "gpumem/errors.hpp"
#include "ops.hpp"

using namespace gpumem;
using gpumem::ops::i64;

namespace {

constexpr bool cpu = false;  // on_device
constexpr stream_handle no_stream = nullptr;
constexpr float nan_f = std::numeric_limits<float>::quiet_NaN();

std::mt19937& gen() {
  static std::mt19937 g(2024);
  return g;
}

std::vector<float> random_floats(std::size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen());
  return v;
}

// |got - want| <= rel * scale + abs.
bool close(double got, double want, double scale, double rel = 1e-5, double abs = 1e-6) {
  return std::fabs(got - want) <= rel * scale + abs;
}

// Counts the elements of got that are not close to want (scale: max(1, |want|)), reporting the first.
int count_bad(const std::vector<float>& got, const std::vector<double>& want, double rel, double abs,
              const std::string& what) {
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (close(got[i], want[i], std::max(1.0, std::fabs(want[i])), rel, abs)) continue;
    if (bad++ == 0) FAIL_CHECK(what << ": element " << i << " is " << got[i] << ", expected " << want[i]);
  }
  return bad;
}

// d/dx[k] of f by central differences, in double around the float inputs, for the sampled k.
std::vector<std::size_t> samples(std::size_t n, std::size_t count) {
  std::vector<std::size_t> picks;
  for (std::size_t i = 0; i < std::min(n, count); ++i) picks.push_back((i * 7919 + 13) % n);
  return picks;
}

double central_difference(std::vector<float>& x, std::size_t k, float h, const std::function<double()>& f) {
  const float original = x[k];
  x[k] = original + h;
  const double up = f();
  x[k] = original - h;
  const double down = f();
  x[k] = original;
  return (up - down) / (static_cast<double>(original + h) - static_cast<double>(original - h));
}

}  // namespace

TEST_CASE("gemm strided batched matches a double reference") {
  struct shape {
    i64 M, N, K, batch, pad;  // pad: extra elements per stored row (leading dimension > row)
  };
  const shape shapes[] = {{1, 1, 1, 1, 0}, {5, 3, 7, 4, 0}, {4, 9, 6, 3, 5}, {17, 2, 33, 2, 1}, {3, 70, 5, 5, 2}};
  for (const shape& sh : shapes) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      for (const float beta : {0.0f, 1.0f, -0.5f}) {
        for (const bool shared_b : {false, true}) {  // strideB == 0: one B for every product
          const i64 M = sh.M, N = sh.N, K = sh.K, batch = sh.batch;
          const i64 lda = (ta ? M : K) + sh.pad, ldb = (tb ? K : N) + sh.pad, ldc = N + sh.pad;
          const i64 a_rows = ta ? K : M, b_rows = tb ? N : K;
          const i64 stride_a = a_rows * lda + 3, stride_b = shared_b ? 0 : b_rows * ldb, stride_c = M * ldc + 1;
          const auto A = random_floats(static_cast<std::size_t>(stride_a * batch));
          const auto B = random_floats(static_cast<std::size_t>(shared_b ? b_rows * ldb : stride_b * batch));
          auto C = random_floats(static_cast<std::size_t>(stride_c * batch));
          const auto C0 = C;
          // beta 0: C is not read; the padding of C must stay as it was.
          if (beta == 0.0f)
            for (i64 i = 0; i < batch; ++i)
              for (i64 m = 0; m < M; ++m)
                for (i64 n = 0; n < N; ++n) C[i * stride_c + m * ldc + n] = nan_f;
          const float alpha = 0.75f;
          ops::gemm_strided_batched(cpu, no_stream, ta, tb, M, N, K, alpha, A.data(), lda, stride_a, B.data(), ldb,
                                    stride_b, beta, C.data(), ldc, stride_c, batch);
          int bad = 0;
          for (i64 i = 0; i < batch; ++i)
            for (i64 m = 0; m < M; ++m)
              for (i64 n = 0; n < N + sh.pad; ++n) {
                const i64 at = i * stride_c + m * ldc + n;
                if (n >= N) {  // padding: untouched
                  if (C[at] != C0[at]) ++bad;
                  continue;
                }
                double want = beta == 0.0f ? 0.0 : static_cast<double>(beta) * C0[at];
                double scale = std::fabs(want);
                for (i64 k = 0; k < K; ++k) {
                  const float a = ta ? A[i * stride_a + k * lda + m] : A[i * stride_a + m * lda + k];
                  const float b = tb ? B[i * stride_b + n * ldb + k] : B[i * stride_b + k * ldb + n];
                  want += alpha * static_cast<double>(a) * b;
                  scale += std::fabs(alpha * static_cast<double>(a) * b);
                }
                if (!close(C[at], want, scale)) ++bad;
              }
          INFO("gemm_strided_batched " << M << "x" << N << "x" << K << " batch " << batch << " ta=" << ta
                                       << " tb=" << tb << " beta=" << beta << ": " << bad << " wrong elements");
          CHECK_EQ(bad, 0);
        }
      }
    }
  }
}

TEST_CASE("gemm strided batched writes interleaved outputs and checks its arguments") {
  // Attention's layout: batch = heads, each C_i a column slice of one [M, heads*N] matrix.
  const i64 M = 6, N = 4, K = 5, heads = 3, ldc = heads * N;
  const auto A = random_floats(static_cast<std::size_t>(heads * M * K));
  const auto B = random_floats(static_cast<std::size_t>(heads * K * N));
  std::vector<float> C(static_cast<std::size_t>(M * ldc), nan_f);
  ops::gemm_strided_batched(cpu, no_stream, false, false, M, N, K, 1.0f, A.data(), K, M * K, B.data(), N, K * N, 0.0f,
                            C.data(), ldc, N, heads);
  for (i64 h = 0; h < heads; ++h)
    for (i64 m = 0; m < M; ++m)
      for (i64 n = 0; n < N; ++n) {
        double want = 0.0, scale = 0.0;
        for (i64 k = 0; k < K; ++k) {
          want += static_cast<double>(A[h * M * K + m * K + k]) * B[h * K * N + k * N + n];
          scale += std::fabs(static_cast<double>(A[h * M * K + m * K + k]) * B[h * K * N + k * N + n]);
        }
        CHECK(close(C[m * ldc + h * N + n], want, scale));
      }
  // alpha 0: A and B are not read, C = beta C.
  std::vector<float> nan_in(static_cast<std::size_t>(heads * M * K), nan_f);
  auto C2 = C;
  ops::gemm_strided_batched(cpu, no_stream, false, false, M, N, K, 0.0f, nan_in.data(), K, M * K, nan_in.data(), N,
                            K * N, 2.0f, C2.data(), ldc, N, heads);
  for (std::size_t i = 0; i < C.size(); ++i) CHECK_EQ(C2[i], 2.0f * C[i]);

  float* c = C.data();
  const float* a = A.data();
  const float* b = B.data();
  auto call = [&](i64 m, i64 n, i64 k, i64 lda, i64 ldb, i64 ld_c, i64 sa, i64 sb, i64 sc, i64 batch) {
    ops::gemm_strided_batched(cpu, no_stream, false, false, m, n, k, 1.0f, a, lda, sa, b, ldb, sb, 0.0f, c, ld_c, sc,
                              batch);
  };
  CHECK_THROWS_AS(call(0, N, K, K, N, N, 0, 0, 0, 1), invalid_argument);       // M = 0
  CHECK_THROWS_AS(call(M, -1, K, K, N, N, 0, 0, 0, 1), invalid_argument);      // N < 0
  CHECK_THROWS_AS(call(M, N, 0, K, N, N, 0, 0, 0, 1), invalid_argument);       // K = 0
  CHECK_THROWS_AS(call(M, N, K, K, N, N, 0, 0, M * N, 0), invalid_argument);   // batch 0
  CHECK_THROWS_AS(call(M, N, K, K - 1, N, N, 0, 0, 0, 1), invalid_argument);   // lda < K
  CHECK_THROWS_AS(call(M, N, K, K, N - 1, N, 0, 0, 0, 1), invalid_argument);   // ldb < N
  CHECK_THROWS_AS(call(M, N, K, K, N, N - 1, 0, 0, 0, 1), invalid_argument);   // ldc < N
  CHECK_THROWS_AS(call(M, N, K, K, N, N, -1, 0, 0, 1), invalid_argument);      // negative stride
  CHECK_THROWS_AS(call(M, N, K, K, N, N, 0, 0, 0, 2), invalid_argument);       // C_0 and C_1 the same
  CHECK_THROWS_AS(call(M, N, K, K, N, ldc, 0, 0, N - 1, 2), invalid_argument); // interleaved rows overlap
  try {
    call(M, N, K, K - 1, N, N, 0, 0, 0, 1);
  } catch (const invalid_argument& e) {
    CHECK_EQ(std::string(e.what()), std::string("Expected integer >= 5 for lda but received 4"));
  }
  CHECK_THROWS_AS(ops::gemm_strided_batched(cpu, no_stream, false, false, M, N, K, 1.0f, nullptr, K, 0, b, N, 0, 0.0f,
                                            c, N, 0, 1),
                  invalid_argument);
}

TEST_CASE("heads to batch and batch to heads are inverse layout changes") {
  const i64 B = 2, T = 5, H = 3, D = 4, width = 3 * H * D;  // q, k, v side by side
  const auto qkv = random_floats(static_cast<std::size_t>(B * T * width));
  for (i64 part = 0; part < 3; ++part) {
    std::vector<float> Y(static_cast<std::size_t>(B * H * T * D), nan_f);
    ops::heads_to_batch(cpu, no_stream, qkv.data() + part * H * D, width, Y.data(), B, T, H, D);
    for (i64 b = 0; b < B; ++b)
      for (i64 h = 0; h < H; ++h)
        for (i64 t = 0; t < T; ++t)
          for (i64 d = 0; d < D; ++d)
            CHECK_EQ(Y[((b * H + h) * T + t) * D + d], qkv[(b * T + t) * width + part * H * D + h * D + d]);
    // Back into a buffer of sentinels: only this part's elements change, to the original values.
    std::vector<float> back(qkv.size(), -9.0f);
    ops::batch_to_heads(cpu, no_stream, Y.data(), back.data() + part * H * D, width, B, T, H, D);
    for (i64 r = 0; r < B * T; ++r)
      for (i64 c = 0; c < width; ++c) {
        const bool mine = c >= part * H * D && c < (part + 1) * H * D;
        CHECK_EQ(back[r * width + c], mine ? qkv[r * width + c] : -9.0f);
      }
  }
  std::vector<float> Y(static_cast<std::size_t>(B * H * T * D));
  CHECK_THROWS_AS(ops::heads_to_batch(cpu, no_stream, qkv.data(), H * D - 1, Y.data(), B, T, H, D), invalid_argument);
  CHECK_THROWS_AS(ops::heads_to_batch(cpu, no_stream, qkv.data(), width, Y.data(), 0, T, H, D), invalid_argument);
  CHECK_THROWS_AS(ops::batch_to_heads(cpu, no_stream, Y.data(), nullptr, width, B, T, H, D), invalid_argument);
  CHECK_THROWS_AS(ops::batch_to_heads(cpu, no_stream, Y.data(), Y.data(), width, B, T, H, -2), invalid_argument);
}

TEST_CASE("causal softmax matches a double reference in and out of place") {
  const i64 rows = 3, T = 37;
  const float scale = 0.35f;
  const auto S = random_floats(static_cast<std::size_t>(rows * T * T), -4.0f, 4.0f);
  std::vector<double> want(S.size());
  for (i64 q = 0; q < rows * T; ++q) {
    const i64 i = q % T;
    double m = -1e300, sum = 0.0;
    for (i64 j = 0; j <= i; ++j) m = std::max(m, static_cast<double>(scale) * S[q * T + j]);
    for (i64 j = 0; j <= i; ++j) sum += std::exp(static_cast<double>(scale) * S[q * T + j] - m);
    for (i64 j = 0; j < T; ++j)
      want[q * T + j] = j <= i ? std::exp(static_cast<double>(scale) * S[q * T + j] - m) / sum : 0.0;
  }
  std::vector<float> P(S.size(), nan_f);
  ops::causal_softmax(cpu, no_stream, S.data(), P.data(), rows, T, scale);
  CHECK_EQ(count_bad(P, want, 1e-5, 1e-7, "causal_softmax"), 0);
  for (i64 q = 0; q < rows * T; ++q)
    for (i64 j = q % T + 1; j < T; ++j) CHECK_EQ(P[q * T + j], 0.0f);  // exactly 0 above the diagonal
  auto inplace = S;
  ops::causal_softmax(cpu, no_stream, inplace.data(), inplace.data(), rows, T, scale);
  CHECK(inplace == P);
  // Large scores: the maximum is subtracted, nothing overflows.
  std::vector<float> big(static_cast<std::size_t>(T * T), 1000.0f), Pbig(big.size());
  ops::causal_softmax(cpu, no_stream, big.data(), Pbig.data(), 1, T, 1.0f);
  for (i64 i = 0; i < T; ++i) CHECK(close(Pbig[i * T], 1.0 / static_cast<double>(i + 1), 1.0));
  CHECK_THROWS_AS(ops::causal_softmax(cpu, no_stream, S.data(), P.data(), 0, T, scale), invalid_argument);
  CHECK_THROWS_AS(ops::causal_softmax(cpu, no_stream, S.data(), P.data(), rows, 0, scale), invalid_argument);
  CHECK_THROWS_AS(ops::causal_softmax(cpu, no_stream, nullptr, P.data(), rows, T, scale), invalid_argument);
}

TEST_CASE("causal softmax backward matches its formula and finite differences") {
  const i64 rows = 2, T = 9;
  const float scale = 0.5f;
  auto S = random_floats(static_cast<std::size_t>(rows * T * T), -2.0f, 2.0f);
  const auto W = random_floats(S.size());  // loss = sum(P * W), so dL/dP = W
  std::vector<float> P(S.size());
  ops::causal_softmax(cpu, no_stream, S.data(), P.data(), rows, T, scale);
  std::vector<float> dS(S.size(), nan_f);
  ops::causal_softmax_backward(cpu, no_stream, P.data(), W.data(), dS.data(), rows, T, scale);
  std::vector<double> want(S.size());
  for (i64 q = 0; q < rows * T; ++q) {
    const i64 i = q % T;
    double dot = 0.0;
    for (i64 k = 0; k <= i; ++k) dot += static_cast<double>(P[q * T + k]) * W[q * T + k];
    for (i64 j = 0; j < T; ++j)
      want[q * T + j] = j <= i ? static_cast<double>(scale) * P[q * T + j] * (W[q * T + j] - dot) : 0.0;
  }
  CHECK_EQ(count_bad(dS, want, 1e-5, 1e-7, "causal_softmax_backward"), 0);
  auto inplace = W;  // dS may be dP
  ops::causal_softmax_backward(cpu, no_stream, P.data(), inplace.data(), inplace.data(), rows, T, scale);
  CHECK(inplace == dS);

  std::vector<float> Pk(S.size());
  const auto loss = [&] {
    ops::causal_softmax(cpu, no_stream, S.data(), Pk.data(), rows, T, scale);
    double l = 0.0;
    for (std::size_t i = 0; i < Pk.size(); ++i) l += static_cast<double>(Pk[i]) * W[i];
    return l;
  };
  int bad = 0;
  for (const std::size_t k : samples(S.size(), 60)) {
    const double fd = central_difference(S, k, 1e-2f, loss);
    if (!close(dS[k], fd, std::fabs(fd), 1e-2, 2e-4)) ++bad;
  }
  CHECK_EQ(bad, 0);
  CHECK_THROWS_AS(ops::causal_softmax_backward(cpu, no_stream, P.data(), W.data(), nullptr, rows, T, scale),
                  invalid_argument);
}

TEST_CASE("layer norm matches a double reference") {
  const i64 rows = 7, cols = 45;
  const float eps = 1e-5f;
  const auto X = random_floats(static_cast<std::size_t>(rows * cols), -3.0f, 5.0f);
  const auto gamma = random_floats(static_cast<std::size_t>(cols), 0.5f, 1.5f);
  const auto beta = random_floats(static_cast<std::size_t>(cols));
  std::vector<float> Y(X.size(), nan_f), mean(rows, nan_f), rstd(rows, nan_f);
  ops::layer_norm(cpu, no_stream, X.data(), gamma.data(), beta.data(), Y.data(), mean.data(), rstd.data(), rows, cols,
                  eps);
  std::vector<double> want(X.size());
  for (i64 r = 0; r < rows; ++r) {
    double mu = 0.0, var = 0.0;
    for (i64 c = 0; c < cols; ++c) mu += X[r * cols + c];
    mu /= static_cast<double>(cols);
    for (i64 c = 0; c < cols; ++c) var += (X[r * cols + c] - mu) * (X[r * cols + c] - mu);
    var /= static_cast<double>(cols);
    const double rs = 1.0 / std::sqrt(var + eps);
    CHECK(close(mean[r], mu, std::fabs(mu)));
    CHECK(close(rstd[r], rs, rs));
    for (i64 c = 0; c < cols; ++c) want[r * cols + c] = (X[r * cols + c] - mu) * rs * gamma[c] + beta[c];
  }
  CHECK_EQ(count_bad(Y, want, 1e-5, 1e-6, "layer_norm"), 0);
  auto inplace = X;  // Y may be X
  ops::layer_norm(cpu, no_stream, inplace.data(), gamma.data(), beta.data(), inplace.data(), mean.data(), rstd.data(),
                  rows, cols, eps);
  CHECK(inplace == Y);
  // A constant row: variance 0, rstd = 1/sqrt(eps), Y = beta.
  std::vector<float> flat(static_cast<std::size_t>(cols), 2.5f), Yf(flat.size()), m1(1), r1(1);
  ops::layer_norm(cpu, no_stream, flat.data(), gamma.data(), beta.data(), Yf.data(), m1.data(), r1.data(), 1, cols,
                  eps);
  for (i64 c = 0; c < cols; ++c) CHECK_EQ(Yf[c], beta[c]);
  CHECK(close(r1[0], 1.0 / std::sqrt(static_cast<double>(eps)), 1.0 / std::sqrt(static_cast<double>(eps))));
  CHECK_THROWS_AS(ops::layer_norm(cpu, no_stream, X.data(), gamma.data(), beta.data(), Y.data(), mean.data(),
                                  rstd.data(), rows, 0, eps),
                  invalid_argument);
  CHECK_THROWS_AS(ops::layer_norm(cpu, no_stream, X.data(), gamma.data(), beta.data(), Y.data(), mean.data(),
                                  rstd.data(), rows, cols, -1.0f),
                  invalid_argument);
  CHECK_THROWS_AS(ops::layer_norm(cpu, no_stream, X.data(), gamma.data(), beta.data(), Y.data(), nullptr, rstd.data(),
                                  rows, cols, eps),
                  invalid_argument);
}

TEST_CASE("layer norm backward matches finite differences and accumulates") {
  const i64 rows = 5, cols = 12;
  const float eps = 1e-5f;
  auto X = random_floats(static_cast<std::size_t>(rows * cols), -2.0f, 2.0f);
  auto gamma = random_floats(static_cast<std::size_t>(cols), 0.5f, 1.5f);
  auto beta = random_floats(static_cast<std::size_t>(cols));
  const auto W = random_floats(X.size());  // loss = sum(Y * W): dL/dY = W
  std::vector<float> Y(X.size()), mean(rows), rstd(rows);
  const auto loss = [&] {
    ops::layer_norm(cpu, no_stream, X.data(), gamma.data(), beta.data(), Y.data(), mean.data(), rstd.data(), rows,
                    cols, eps);
    double l = 0.0;
    for (std::size_t i = 0; i < Y.size(); ++i) l += static_cast<double>(Y[i]) * W[i];
    return l;
  };
  loss();
  std::vector<float> dX(X.size(), nan_f), dGamma(cols, nan_f), dBeta(cols, nan_f);
  ops::layer_norm_backward(cpu, no_stream, W.data(), X.data(), gamma.data(), mean.data(), rstd.data(), dX.data(),
                           dGamma.data(), dBeta.data(), rows, cols, false);
  const auto saved_mean = mean, saved_rstd = rstd;
  int bad = 0;
  for (const std::size_t k : samples(X.size(), 40)) {
    const double fd = central_difference(X, k, 1e-2f, loss);
    if (!close(dX[k], fd, std::fabs(fd), 2e-2, 2e-3)) ++bad;
  }
  for (std::size_t k = 0; k < gamma.size(); ++k) {
    const double fg = central_difference(gamma, k, 1e-2f, loss), fb = central_difference(beta, k, 1e-2f, loss);
    if (!close(dGamma[k], fg, std::fabs(fg), 1e-2, 1e-3)) ++bad;
    if (!close(dBeta[k], fb, std::fabs(fb), 1e-2, 1e-3)) ++bad;
  }
  CHECK_EQ(bad, 0);
  // The column sums exactly: dBeta = sum_r W, dGamma = sum_r W * xhat.
  for (i64 c = 0; c < cols; ++c) {
    double sb = 0.0, sg = 0.0, scale = 0.0;
    for (i64 r = 0; r < rows; ++r) {
      const double xhat = (X[r * cols + c] - static_cast<double>(saved_mean[r])) * saved_rstd[r];
      sb += W[r * cols + c];
      sg += W[r * cols + c] * xhat;
      scale += std::fabs(W[r * cols + c] * xhat) + std::fabs(W[r * cols + c]);
    }
    CHECK(close(dBeta[c], sb, scale));
    CHECK(close(dGamma[c], sg, scale));
  }
  // accumulate adds to what is there; dX may be dY.
  auto dY = W;
  auto dGamma2 = dGamma, dBeta2 = dBeta;
  ops::layer_norm_backward(cpu, no_stream, dY.data(), X.data(), gamma.data(), saved_mean.data(), saved_rstd.data(),
                           dY.data(), dGamma2.data(), dBeta2.data(), rows, cols, true);
  CHECK(dY == dX);
  for (i64 c = 0; c < cols; ++c) {
    CHECK_EQ(dGamma2[c], dGamma[c] + dGamma[c]);
    CHECK_EQ(dBeta2[c], dBeta[c] + dBeta[c]);
  }
  CHECK_THROWS_AS(ops::layer_norm_backward(cpu, no_stream, W.data(), X.data(), gamma.data(), mean.data(), rstd.data(),
                                           dX.data(), dGamma.data(), dBeta.data(), 0, cols, false),
                  invalid_argument);
  CHECK_THROWS_AS(ops::layer_norm_backward(cpu, no_stream, W.data(), X.data(), gamma.data(), mean.data(), rstd.data(),
                                           dX.data(), nullptr, dBeta.data(), rows, cols, false),
                  invalid_argument);
}

TEST_CASE("gelu matches the tanh approximation and its derivative") {
  const i64 n = 513;
  auto X = random_floats(static_cast<std::size_t>(n), -5.0f, 5.0f);
  X[0] = 0.0f;
  std::vector<float> Y(X.size(), nan_f);
  ops::gelu(cpu, no_stream, X.data(), Y.data(), n);
  std::vector<double> want(X.size());
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  for (i64 i = 0; i < n; ++i) {
    const double x = X[i];
    want[i] = 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
  }
  CHECK_EQ(count_bad(Y, want, 1e-6, 1e-7, "gelu"), 0);
  CHECK_EQ(Y[0], 0.0f);
  auto inplace = X;
  ops::gelu(cpu, no_stream, inplace.data(), inplace.data(), n);
  CHECK(inplace == Y);

  const auto dY = random_floats(X.size());
  std::vector<float> dX(X.size(), nan_f);
  ops::gelu_backward(cpu, no_stream, X.data(), dY.data(), dX.data(), n);
  std::vector<float> Yk(1);
  int bad = 0;
  for (i64 i = 0; i < n; ++i) {
    const auto f = [&] {
      ops::gelu(cpu, no_stream, &X[i], Yk.data(), 1);
      return static_cast<double>(Yk[0]);
    };
    const double fd = central_difference(X, static_cast<std::size_t>(i), 1e-2f, f) * dY[i];
    if (!close(dX[i], fd, std::fabs(fd), 1e-3, 1e-4)) ++bad;
  }
  CHECK_EQ(bad, 0);
  CHECK(close(dX[0], 0.5 * dY[0], 1.0));  // GELU'(0) = 1/2
  auto inplace_d = dY;
  ops::gelu_backward(cpu, no_stream, X.data(), inplace_d.data(), inplace_d.data(), n);
  CHECK(inplace_d == dX);
  CHECK_THROWS_AS(ops::gelu(cpu, no_stream, X.data(), Y.data(), 0), invalid_argument);
  CHECK_THROWS_AS(ops::gelu_backward(cpu, no_stream, X.data(), nullptr, dX.data(), n), invalid_argument);
}

TEST_CASE("embedding and its backward match reference loops") {
  const i64 B = 3, T = 4, C = 6, V = 5, Tmax = 7;
  const std::vector<std::int32_t> tokens = {0, 4, 4, 1, 2, 2, 2, 0, 3, 4, 1, 1};
  const auto wte = random_floats(static_cast<std::size_t>(V * C));
  const auto wpe = random_floats(static_cast<std::size_t>(Tmax * C));
  std::vector<float> out(static_cast<std::size_t>(B * T * C), nan_f);
  ops::embedding(cpu, no_stream, tokens.data(), wte.data(), wpe.data(), out.data(), B, T, C);
  for (i64 r = 0; r < B * T; ++r)
    for (i64 c = 0; c < C; ++c) CHECK_EQ(out[r * C + c], wte[tokens[r] * C + c] + wpe[(r % T) * C + c]);

  const auto dOut = random_floats(out.size());
  std::vector<float> dWte(static_cast<std::size_t>(V * C), 0.5f), dWpe(static_cast<std::size_t>(Tmax * C), 0.25f);
  ops::embedding_backward(cpu, no_stream, dOut.data(), tokens.data(), dWte.data(), dWpe.data(), B, T, C);
  for (i64 v = 0; v < V; ++v)
    for (i64 c = 0; c < C; ++c) {
      double want = 0.5, scale = 0.5;
      for (i64 r = 0; r < B * T; ++r)
        if (tokens[r] == v) {
          want += dOut[r * C + c];
          scale += std::fabs(dOut[r * C + c]);
        }
      CHECK(close(dWte[v * C + c], want, scale));
    }
  for (i64 t = 0; t < Tmax; ++t)
    for (i64 c = 0; c < C; ++c) {
      float s = 0.0f;  // b in order, in float: the order both paths use
      for (i64 b = 0; b < B && t < T; ++b) s += dOut[(b * T + t) * C + c];
      CHECK_EQ(dWpe[t * C + c], 0.25f + s);  // rows t >= T untouched
    }

  // A negative id: rejected before anything is written.
  auto bad_tokens = tokens;
  bad_tokens[7] = -1;
  const auto out_before = out, dWte_before = dWte;
  CHECK_THROWS_AS(ops::embedding(cpu, no_stream, bad_tokens.data(), wte.data(), wpe.data(), out.data(), B, T, C),
                  invalid_argument);
  CHECK(out == out_before);
  CHECK_THROWS_AS(
      ops::embedding_backward(cpu, no_stream, dOut.data(), bad_tokens.data(), dWte.data(), dWpe.data(), B, T, C),
      invalid_argument);
  CHECK(dWte == dWte_before);
  CHECK_THROWS_AS(ops::embedding(cpu, no_stream, tokens.data(), wte.data(), wpe.data(), out.data(), B, 0, C),
                  invalid_argument);
  CHECK_THROWS_AS(ops::embedding(cpu, no_stream, tokens.data(), nullptr, wpe.data(), out.data(), B, T, C),
                  invalid_argument);
}

#ifndef GPUMEM_WITH_CUDA
TEST_CASE("on device in a build without cuda is invalid state") {
  std::vector<float> f(16, 1.0f);
  const std::vector<std::int32_t> tokens(4, 0);
  float* p = f.data();
  CHECK_THROWS_AS(ops::gemm_strided_batched(true, no_stream, false, false, 2, 2, 2, 1.0f, p, 2, 4, p, 2, 4, 0.0f, p, 2,
                                            4, 2),
                  invalid_state);
  CHECK_THROWS_AS(ops::heads_to_batch(true, no_stream, p, 4, p + 8, 1, 2, 2, 2), invalid_state);
  CHECK_THROWS_AS(ops::causal_softmax(true, no_stream, p, p, 1, 4, 1.0f), invalid_state);
  CHECK_THROWS_AS(ops::layer_norm(true, no_stream, p, p, p, p, p, p, 2, 4, 1e-5f), invalid_state);
  CHECK_THROWS_AS(ops::gelu(true, no_stream, p, p, 16), invalid_state);
  CHECK_THROWS_AS(ops::embedding(true, no_stream, tokens.data(), p, p, p, 1, 4, 2), invalid_state);
  for (float v : f) CHECK_EQ(v, 1.0f);  // nothing ran
}
#endif
