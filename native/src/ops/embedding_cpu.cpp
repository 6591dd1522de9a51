// Token and position embeddings: argument checks, dispatch to the GPU, and the CPU references.
// The CPU sums in the GPU's order (dWpe: b in order, in float), so the two agree bit for bit on
// the forward and on dWpe.
#include "ops.hpp"

namespace gpumem::ops {
namespace {

void check_sizes(i64 B, i64 T, i64 C) {
  check::at_least(B, 1, "B");
  check::at_least(T, 1, "T");
  check::at_least(C, 1, "C");
}

// Every id >= 0, before anything is written (ids >= V are the caller's to check: V is not passed).
void check_tokens(const std::int32_t* tokens, i64 n) {
  for (i64 r = 0; r < n; ++r)
    if (tokens[r] < 0) check::bad_index("tokens", r, tokens[r]);
}

}  // namespace

void embedding(bool on_device, stream_handle stream, const std::int32_t* tokens, const float* wte, const float* wpe,
               float* out, i64 B, i64 T, i64 C) {
  check_sizes(B, T, C);
  check::not_null({{tokens, "tokens"}, {wte, "wte"}, {wpe, "wpe"}, {out, "out"}});
  GPUMEM_OPS_ON_DEVICE(embedding(stream, tokens, wte, wpe, out, B, T, C));
  check_tokens(tokens, B * T);
  for (i64 r = 0; r < B * T; ++r) {
    const float* e = wte + static_cast<i64>(tokens[r]) * C;
    const float* p = wpe + (r % T) * C;
    float* o = out + r * C;
    for (i64 c = 0; c < C; ++c) o[c] = e[c] + p[c];
  }
}

void embedding_backward(bool on_device, stream_handle stream, const float* dOut, const std::int32_t* tokens,
                        float* dWte, float* dWpe, i64 B, i64 T, i64 C) {
  check_sizes(B, T, C);
  check::not_null({{dOut, "dOut"}, {tokens, "tokens"}, {dWte, "dWte"}, {dWpe, "dWpe"}});
  GPUMEM_OPS_ON_DEVICE(embedding_backward(stream, dOut, tokens, dWte, dWpe, B, T, C));
  check_tokens(tokens, B * T);
  for (i64 r = 0; r < B * T; ++r) {
    float* g = dWte + static_cast<i64>(tokens[r]) * C;
    const float* d = dOut + r * C;
    for (i64 c = 0; c < C; ++c) g[c] += d[c];
  }
  for (i64 t = 0; t < T; ++t) {
    float* g = dWpe + t * C;
    for (i64 c = 0; c < C; ++c) {
      float s = 0.0f;
      for (i64 b = 0; b < B; ++b) s += dOut[(b * T + t) * C + c];
      g[c] += s;
    }
  }
}

}  // namespace gpumem::ops
