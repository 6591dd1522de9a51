// exports.ops: argument conversion for the ops of src/ops/ops.hpp and the stream workspaces of
// src/ops/workspace.hpp, each call guarded so that
// a C++ exception becomes a JavaScript error (bad arguments: RangeError/TypeError with code
// GPUMEM_INVALID_ARGUMENT and the argument's name). Argument order is native-ops.ts's.
#include "ops_functions.hpp"

#include <cmath>
#include <cstdint>
#include <string>

#include "convert.hpp"
#include "function_helpers.hpp"
#include "gpumem/errors.hpp"
#include "ops/ops.hpp"
#include "ops/workspace.hpp"

namespace gpumem::binding {
namespace {

namespace ops = gpumem::ops;
using ops::i64;
using i32 = std::int32_t;
using u8 = std::uint8_t;

constexpr double max_safe = 9007199254740991.0;  // 2^53 - 1

// The JavaScript arguments of one op call, converted with the checks of ops/op_args.hpp.
class args {
 public:
  args(const Napi::CallbackInfo& info, std::size_t expected, const char* fn) : info_(info) {
    if (info.Length() < expected)
      throw invalid_argument(invalid_argument::kind::type, "arguments",
                             std::string("Expected ") + std::to_string(expected) + " arguments for ops." + fn +
                                 " but received " + std::to_string(info.Length()));
  }

  bool flag(std::size_t i) const { return info_[i].ToBoolean().Value(); }

  stream_handle stream(std::size_t i) const {
    const Napi::Value v = info_[i];
    if (v.IsUndefined() || v.IsNull()) return nullptr;
    return reinterpret_cast<stream_handle>(static_cast<std::uintptr_t>(address(i, "stream")));
  }

  template <class T>
  T* ptr(std::size_t i, const char* name) const {
    return reinterpret_cast<T*>(static_cast<std::uintptr_t>(address(i, name)));
  }

  // An integer (JS number, |v| <= 2^53 - 1); the ops check the range.
  i64 integer(std::size_t i, const char* name) const { return ops::check::integer(number(i, name), name); }

  // A seed, counter offset or byte count: an integer in [0, 2^53 - 1].
  std::uint64_t counter(std::size_t i, const char* name) const {
    const i64 v = integer(i, name);
    ops::check::non_negative(v, name);
    return static_cast<std::uint64_t>(v);
  }

  // An integer that an i32 holds (a value the op writes into i32 elements).
  i32 int32(std::size_t i, const char* name) const {
    const i64 v = integer(i, name);
    ops::check::i32(v, name);
    return static_cast<i32>(v);
  }

  double number(std::size_t i, const char* name) const {
    const Napi::Value v = info_[i];
    if (!v.IsNumber()) ops::check::fail_type(name, "number", describe(v));
    return v.As<Napi::Number>().DoubleValue();
  }

  float f32(std::size_t i, const char* name) const { return static_cast<float>(number(i, name)); }

 private:
  // A pointer: a non-negative safe integer (a BigInt too); 0 is the null pointer, which the ops
  // reject where they must read or write.
  std::uint64_t address(std::size_t i, const char* name) const {
    const Napi::Value v = info_[i];
    if (v.IsBigInt()) {
      bool lossless = false;
      const std::uint64_t a = v.As<Napi::BigInt>().Uint64Value(&lossless);
      if (!lossless) ops::check::fail_range(name, "a pointer (non-negative integer)", describe(v));
      return a;
    }
    if (!v.IsNumber()) ops::check::fail_type(name, "a pointer (non-negative integer)", describe(v));
    const double d = v.As<Napi::Number>().DoubleValue();
    if (!std::isfinite(d) || d < 0 || std::floor(d) != d || d > max_safe)
      ops::check::fail_range(name, "a pointer (non-negative integer)", describe(v));
    return static_cast<std::uint64_t>(d);
  }

  const Napi::CallbackInfo& info_;
};

// The ops that share one argument list, each bound by the one conversion of its shape.

// Y = f(X), n floats (relu, gelu).
Napi::Value elementwise(const Napi::CallbackInfo& info, const char* fn,
                        void (*op)(bool, stream_handle, const float*, float*, i64)) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 5, fn);
    op(a.flag(0), a.stream(1), a.ptr<const float>(2, "X"), a.ptr<float>(3, "Y"), a.integer(4, "n"));
  });
}

// dX = dY * f'(input), n floats; input: what the backward pass reads (relu: its output Y, gelu: its input X).
Napi::Value elementwise_backward(const Napi::CallbackInfo& info, const char* fn, const char* input,
                                 void (*op)(bool, stream_handle, const float*, const float*, float*, i64)) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 6, fn);
    op(a.flag(0), a.stream(1), a.ptr<const float>(2, input), a.ptr<const float>(3, "dY"), a.ptr<float>(4, "dX"),
       a.integer(5, "n"));
  });
}

// Y[rows,cols] += bias[cols], the ReLU after it or not (addBias, addBiasRelu).
Napi::Value bias_add(const Napi::CallbackInfo& info, const char* fn,
                     void (*op)(bool, stream_handle, float*, const float*, i64, i64)) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 6, fn);
    op(a.flag(0), a.stream(1), a.ptr<float>(2, "Y"), a.ptr<const float>(3, "bias"), a.integer(4, "rows"),
       a.integer(5, "cols"));
  });
}

// Y = alpha * X or Y += alpha * X, n floats (scale, axpy).
Napi::Value scaled(const Napi::CallbackInfo& info, const char* fn,
                   void (*op)(bool, stream_handle, float, const float*, float*, i64)) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 6, fn);
    op(a.flag(0), a.stream(1), a.f32(2, "alpha"), a.ptr<const float>(3, "X"), a.ptr<float>(4, "Y"), a.integer(5, "n"));
  });
}

// E rows of H floats moved by an i32 index (gatherRows: X to out, scatterAddRows: src added into out).
Napi::Value indexed_rows(const Napi::CallbackInfo& info, const char* fn, const char* source,
                         void (*op)(bool, stream_handle, const float*, const i32*, float*, i64, i64)) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 7, fn);
    op(a.flag(0), a.stream(1), a.ptr<const float>(2, source), a.ptr<const i32>(3, "index"), a.ptr<float>(4, "out"),
       a.integer(5, "E"), a.integer(6, "H"));
  });
}

// out = A X for the CSR matrix (rowptr, col, val) of N rows, X with H columns stored as X (float or bf16).
template <class X>
Napi::Value sparse_product(const Napi::CallbackInfo& info, const char* fn,
                           void (*op)(bool, stream_handle, const i32*, const i32*, const float*, const X*, float*, i64,
                                      i64)) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 9, fn);
    op(a.flag(0), a.stream(1), a.ptr<const i32>(2, "rowptr"), a.ptr<const i32>(3, "col"), a.ptr<const float>(4, "val"),
       a.ptr<const X>(5, "X"), a.ptr<float>(6, "out"), a.integer(7, "N"), a.integer(8, "H"));
  });
}

Napi::Value Gemm(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 12, "gemm");
    ops::gemm(a.flag(0), a.stream(1), a.flag(2), a.flag(3), a.integer(4, "M"), a.integer(5, "N"), a.integer(6, "K"),
              a.f32(7, "alpha"), a.ptr<const float>(8, "A"), a.ptr<const float>(9, "B"), a.f32(10, "beta"),
              a.ptr<float>(11, "C"));
  });
}

Napi::Value AddBias(const Napi::CallbackInfo& info) { return bias_add(info, "addBias", ops::add_bias); }

Napi::Value BiasGrad(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 7, "biasGrad");
    ops::bias_grad(a.flag(0), a.stream(1), a.ptr<const float>(2, "dY"), a.ptr<float>(3, "dBias"),
                   a.integer(4, "rows"), a.integer(5, "cols"), a.flag(6));
  });
}

Napi::Value AddBiasRelu(const Napi::CallbackInfo& info) { return bias_add(info, "addBiasRelu", ops::add_bias_relu); }

Napi::Value ReluBiasGrad(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 7, "reluBiasGrad");
    ops::relu_bias_grad(a.flag(0), a.stream(1), a.ptr<const float>(2, "Y"), a.ptr<float>(3, "dY"),
                        a.ptr<float>(4, "dBias"), a.integer(5, "rows"), a.integer(6, "cols"));
  });
}

Napi::Value Relu(const Napi::CallbackInfo& info) { return elementwise(info, "relu", ops::relu); }

Napi::Value ReluBackward(const Napi::CallbackInfo& info) {
  return elementwise_backward(info, "reluBackward", "Y", ops::relu_backward);
}

Napi::Value Dropout(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 9, "dropout");
    ops::dropout(a.flag(0), a.stream(1), a.ptr<const float>(2, "X"), a.ptr<float>(3, "Y"), a.ptr<u8>(4, "mask"),
                 a.integer(5, "n"), a.number(6, "p"), a.counter(7, "seed"), a.counter(8, "offset"));
  });
}

Napi::Value DropoutBackward(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 7, "dropoutBackward");
    ops::dropout_backward(a.flag(0), a.stream(1), a.ptr<const float>(2, "dY"), a.ptr<const u8>(3, "mask"),
                          a.ptr<float>(4, "dX"), a.integer(5, "n"), a.number(6, "p"));
  });
}

Napi::Value SoftmaxCrossEntropy(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 11, "softmaxCrossEntropy");
    ops::softmax_cross_entropy(a.flag(0), a.stream(1), a.ptr<const float>(2, "logits"), a.ptr<const i32>(3, "labels"),
                               a.ptr<const i32>(4, "rowIndex"), a.integer(5, "R"), a.integer(6, "N"),
                               a.integer(7, "C"), a.ptr<float>(8, "dLogits"), a.ptr<float>(9, "lossOut"),
                               a.ptr<i32>(10, "correctOut"));
  });
}

Napi::Value SoftmaxCrossEntropyBiasGrad(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 11, "softmaxCrossEntropyBiasGrad");
    ops::softmax_cross_entropy_bias_grad(a.flag(0), a.stream(1), a.ptr<const float>(2, "logits"),
                                         a.ptr<const i32>(3, "labels"), a.integer(4, "N"), a.integer(5, "C"),
                                         a.ptr<float>(6, "dLogits"), a.ptr<float>(7, "dBias"),
                                         a.ptr<float>(8, "lossOut"), a.ptr<i32>(9, "correctOut"),
                                         a.ptr<const i32>(10, "step"));
  });
}

Napi::Value Accuracy(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 9, "accuracy");
    ops::accuracy(a.flag(0), a.stream(1), a.ptr<const float>(2, "logits"), a.ptr<const i32>(3, "labels"),
                  a.ptr<const i32>(4, "rowIndex"), a.integer(5, "R"), a.integer(6, "N"), a.integer(7, "C"),
                  a.ptr<i32>(8, "correctOut"));
  });
}

Napi::Value Sgd(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 6, "sgd");
    ops::sgd(a.flag(0), a.stream(1), a.ptr<float>(2, "W"), a.ptr<const float>(3, "G"), a.integer(4, "n"),
             a.f32(5, "lr"));
  });
}

Napi::Value Adam(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 12, "adam");
    ops::adam(a.flag(0), a.stream(1), a.ptr<float>(2, "W"), a.ptr<const float>(3, "G"), a.ptr<float>(4, "M"),
              a.ptr<float>(5, "V"), a.integer(6, "n"), a.f32(7, "lr"), a.f32(8, "beta1"), a.f32(9, "beta2"),
              a.f32(10, "eps"), a.integer(11, "step"));
  });
}

Napi::Value GatherRows(const Napi::CallbackInfo& info) {
  return indexed_rows(info, "gatherRows", "X", ops::gather_rows);
}

Napi::Value GatherBatch(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 10, "gatherBatch");
    ops::gather_batch(a.flag(0), a.stream(1), a.ptr<const float>(2, "X"), a.ptr<const i32>(3, "labels"),
                      a.ptr<const i32>(4, "index"), a.ptr<const i32>(5, "step"), a.integer(6, "rows"),
                      a.integer(7, "H"), a.ptr<float>(8, "xOut"), a.ptr<i32>(9, "yOut"));
  });
}

Napi::Value ScatterAddRows(const Napi::CallbackInfo& info) {
  return indexed_rows(info, "scatterAddRows", "src", ops::scatter_add_rows);
}

Napi::Value Spmm(const Napi::CallbackInfo& info) { return sparse_product<float>(info, "spmm", ops::spmm); }

Napi::Value SpmmBf16(const Napi::CallbackInfo& info) {
  return sparse_product<std::uint16_t>(info, "spmmBf16", ops::spmm_bf16);
}

Napi::Value F32ToBf16(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 5, "f32ToBf16");
    ops::f32_to_bf16(a.flag(0), a.stream(1), a.ptr<const float>(2, "X"), a.ptr<std::uint16_t>(3, "Y"),
                     a.integer(4, "n"));
  });
}

Napi::Value CsrBuildTempBytes(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    args a(info, 3, "csrBuildTempBytes");
    const std::size_t bytes = ops::csr_build_temp_bytes(a.flag(0), a.integer(1, "E"), a.integer(2, "N"));
    return Napi::Number::New(info.Env(), static_cast<double>(bytes));
  });
}

Napi::Value CsrBuild(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 10, "csrBuild");
    const std::uint64_t temp_bytes = a.counter(9, "tempBytes");
    ops::csr_build(a.flag(0), a.stream(1), a.ptr<const i32>(2, "rows"), a.ptr<const i32>(3, "cols"),
                   a.integer(4, "E"), a.integer(5, "N"), a.ptr<i32>(6, "rowptr"), a.ptr<i32>(7, "colOut"),
                   a.ptr<void>(8, "temp"), static_cast<std::size_t>(temp_bytes));
  });
}

Napi::Value RowDegrees(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 5, "rowDegrees");
    ops::row_degrees(a.flag(0), a.stream(1), a.ptr<const i32>(2, "rowptr"), a.integer(3, "N"),
                     a.ptr<float>(4, "deg"));
  });
}

Napi::Value EdgeNorm(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 8, "edgeNorm");
    const i64 mode = a.integer(6, "mode");
    if (mode < 0 || mode > 2)
      ops::check::fail_range("mode", "0 (symmetric), 1 (by row) or 2 (by column)", std::to_string(mode));
    ops::edge_norm(a.flag(0), a.stream(1), a.ptr<const i32>(2, "rowptr"), a.ptr<const i32>(3, "col"),
                   a.integer(4, "N"), a.ptr<const float>(5, "deg"), static_cast<int>(mode), a.ptr<float>(7, "val"));
  });
}

Napi::Value EdgeNormList(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 8, "edgeNormList");
    ops::edge_norm_list(a.flag(0), a.stream(1), a.ptr<const i32>(2, "src"), a.ptr<const i32>(3, "dst"),
                        a.ptr<const float>(4, "deg"), a.integer(5, "E"), static_cast<int>(a.integer(6, "mode")),
                        a.ptr<float>(7, "w"));
  });
}

Napi::Value ScaleRows(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 7, "scaleRows");
    ops::scale_rows(a.flag(0), a.stream(1), a.ptr<const float>(2, "X"), a.ptr<const float>(3, "w"),
                    a.ptr<float>(4, "out"), a.integer(5, "E"), a.integer(6, "H"));
  });
}

Napi::Value RandomInts(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 7, "randomInts");
    ops::random_ints(a.flag(0), a.stream(1), a.ptr<i32>(2, "out"), a.integer(3, "n"), a.integer(4, "modulo"),
                     a.counter(5, "seed"), a.counter(6, "offset"));
  });
}

Napi::Value RandomNormal(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 6, "randomNormal");
    ops::random_normal(a.flag(0), a.stream(1), a.ptr<float>(2, "out"), a.integer(3, "n"), a.counter(4, "seed"),
                       a.counter(5, "offset"));
  });
}

Napi::Value RandomUniform(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 8, "randomUniform");
    ops::random_uniform(a.flag(0), a.stream(1), a.ptr<float>(2, "out"), a.integer(3, "n"), a.f32(4, "low"),
                        a.f32(5, "high"), a.counter(6, "seed"), a.counter(7, "offset"));
  });
}

Napi::Value FillF32(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 5, "fillF32");
    ops::fill_f32(a.flag(0), a.stream(1), a.ptr<float>(2, "ptr"), a.integer(3, "n"), a.f32(4, "value"));
  });
}

Napi::Value FillI32(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 5, "fillI32");
    const i32 value = a.int32(4, "value");
    ops::fill_i32(a.flag(0), a.stream(1), a.ptr<i32>(2, "ptr"), a.integer(3, "n"), value);
  });
}

Napi::Value AddI32(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 4, "addI32");
    const i32 value = a.int32(3, "value");
    ops::add_i32(a.flag(0), a.stream(1), a.ptr<i32>(2, "ptr"), value);
  });
}

Napi::Value StreamWait(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 3, "streamWait");
    ops::stream_wait(a.flag(0), a.stream(1), a.stream(2));
  });
}

Napi::Value Scale(const Napi::CallbackInfo& info) { return scaled(info, "scale", ops::scale); }

Napi::Value Axpy(const Napi::CallbackInfo& info) { return scaled(info, "axpy", ops::axpy); }

Napi::Value GemmStridedBatched(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 19, "gemmStridedBatched");
    ops::gemm_strided_batched(a.flag(0), a.stream(1), a.flag(2), a.flag(3), a.integer(4, "M"), a.integer(5, "N"),
                              a.integer(6, "K"), a.f32(7, "alpha"), a.ptr<const float>(8, "A"), a.integer(9, "lda"),
                              a.integer(10, "strideA"), a.ptr<const float>(11, "B"), a.integer(12, "ldb"),
                              a.integer(13, "strideB"), a.f32(14, "beta"), a.ptr<float>(15, "C"),
                              a.integer(16, "ldc"), a.integer(17, "strideC"), a.integer(18, "batch"));
  });
}

Napi::Value HeadsToBatch(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 9, "headsToBatch");
    ops::heads_to_batch(a.flag(0), a.stream(1), a.ptr<const float>(2, "X"), a.integer(3, "ldx"), a.ptr<float>(4, "Y"),
                        a.integer(5, "B"), a.integer(6, "T"), a.integer(7, "H"), a.integer(8, "D"));
  });
}

Napi::Value BatchToHeads(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 9, "batchToHeads");
    ops::batch_to_heads(a.flag(0), a.stream(1), a.ptr<const float>(2, "Y"), a.ptr<float>(3, "X"), a.integer(4, "ldx"),
                        a.integer(5, "B"), a.integer(6, "T"), a.integer(7, "H"), a.integer(8, "D"));
  });
}

Napi::Value CausalSoftmax(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 7, "causalSoftmax");
    ops::causal_softmax(a.flag(0), a.stream(1), a.ptr<const float>(2, "S"), a.ptr<float>(3, "P"), a.integer(4, "rows"),
                        a.integer(5, "T"), a.f32(6, "scale"));
  });
}

Napi::Value CausalSoftmaxBackward(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 8, "causalSoftmaxBackward");
    ops::causal_softmax_backward(a.flag(0), a.stream(1), a.ptr<const float>(2, "P"), a.ptr<const float>(3, "dP"),
                                 a.ptr<float>(4, "dS"), a.integer(5, "rows"), a.integer(6, "T"), a.f32(7, "scale"));
  });
}

Napi::Value LayerNorm(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 11, "layerNorm");
    ops::layer_norm(a.flag(0), a.stream(1), a.ptr<const float>(2, "X"), a.ptr<const float>(3, "gamma"),
                    a.ptr<const float>(4, "beta"), a.ptr<float>(5, "Y"), a.ptr<float>(6, "mean"),
                    a.ptr<float>(7, "rstd"), a.integer(8, "rows"), a.integer(9, "cols"), a.f32(10, "eps"));
  });
}

Napi::Value LayerNormBackward(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 13, "layerNormBackward");
    ops::layer_norm_backward(a.flag(0), a.stream(1), a.ptr<const float>(2, "dY"), a.ptr<const float>(3, "X"),
                             a.ptr<const float>(4, "gamma"), a.ptr<const float>(5, "mean"),
                             a.ptr<const float>(6, "rstd"), a.ptr<float>(7, "dX"), a.ptr<float>(8, "dGamma"),
                             a.ptr<float>(9, "dBeta"), a.integer(10, "rows"), a.integer(11, "cols"), a.flag(12));
  });
}

Napi::Value Gelu(const Napi::CallbackInfo& info) { return elementwise(info, "gelu", ops::gelu); }

Napi::Value GeluBackward(const Napi::CallbackInfo& info) {
  return elementwise_backward(info, "geluBackward", "X", ops::gelu_backward);
}

Napi::Value Embedding(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 9, "embedding");
    ops::embedding(a.flag(0), a.stream(1), a.ptr<const i32>(2, "tokens"), a.ptr<const float>(3, "wte"),
                   a.ptr<const float>(4, "wpe"), a.ptr<float>(5, "out"), a.integer(6, "B"), a.integer(7, "T"),
                   a.integer(8, "C"));
  });
}

Napi::Value EmbeddingBackward(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 9, "embeddingBackward");
    ops::embedding_backward(a.flag(0), a.stream(1), a.ptr<const float>(2, "dOut"), a.ptr<const i32>(3, "tokens"),
                            a.ptr<float>(4, "dWte"), a.ptr<float>(5, "dWpe"), a.integer(6, "B"), a.integer(7, "T"),
                            a.integer(8, "C"));
  });
}

Napi::Value GemmBackend(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    const ops::gemm_backend_info b = ops::gemm_backend();
    Napi::Object o = Napi::Object::New(info.Env());
    o.Set("backend", b.backend);
    o.Set("reason", b.reason);
    return o;
  });
}

// bindStreamWorkspace(onDevice, stream, scratchPtr, scratchBytes, blasPtr, blasBytes)
Napi::Value BindStreamWorkspace(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 6, "bindStreamWorkspace");
    const i64 scratch_bytes = a.integer(3, "scratchBytes"), blas_bytes = a.integer(5, "blasBytes");
    ops::check::non_negative(scratch_bytes, "scratchBytes");
    ops::check::non_negative(blas_bytes, "blasBytes");
    ops::bind_stream_workspace(a.flag(0), a.stream(1), a.ptr<void>(2, "scratchPtr"), std::size_t(scratch_bytes),
                               a.ptr<void>(4, "blasPtr"), std::size_t(blas_bytes));
  });
}

// unbindStreamWorkspace(onDevice, stream)
Napi::Value UnbindStreamWorkspace(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    args a(info, 2, "unbindStreamWorkspace");
    ops::unbind_stream_workspace(a.flag(0), a.stream(1));
  });
}

// workspaceBytes(onDevice) -> { scratchBytes, blasBytes }
Napi::Value WorkspaceBytes(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    args a(info, 1, "workspaceBytes");
    const ops::workspace_sizes sizes = ops::workspace_bytes(a.flag(0));
    Napi::Object o = Napi::Object::New(info.Env());
    o.Set("scratchBytes", Napi::Number::New(info.Env(), static_cast<double>(sizes.scratch_bytes)));
    o.Set("blasBytes", Napi::Number::New(info.Env(), static_cast<double>(sizes.blas_bytes)));
    return o;
  });
}

Napi::Value UnboundWorkspaceAllocations(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    return Napi::Number::New(info.Env(), static_cast<double>(ops::unbound_allocations()));
  });
}

}  // namespace

void register_ops(Napi::Env env, Napi::Object exports) {
  Napi::Object o = Napi::Object::New(env);
  set_functions(env, o,
                {{"gemm", Gemm},
                 {"addBias", AddBias},
                 {"addBiasRelu", AddBiasRelu},
                 {"reluBiasGrad", ReluBiasGrad},
                 {"biasGrad", BiasGrad},
                 {"relu", Relu},
                 {"reluBackward", ReluBackward},
                 {"dropout", Dropout},
                 {"dropoutBackward", DropoutBackward},
                 {"softmaxCrossEntropy", SoftmaxCrossEntropy},
                 {"softmaxCrossEntropyBiasGrad", SoftmaxCrossEntropyBiasGrad},
                 {"accuracy", Accuracy},
                 {"sgd", Sgd},
                 {"adam", Adam},
                 {"gatherRows", GatherRows},
                 {"gatherBatch", GatherBatch},
                 {"scatterAddRows", ScatterAddRows},
                 {"spmm", Spmm},
                 {"spmmBf16", SpmmBf16},
                 {"f32ToBf16", F32ToBf16},
                 {"csrBuildTempBytes", CsrBuildTempBytes},
                 {"csrBuild", CsrBuild},
                 {"rowDegrees", RowDegrees},
                 {"edgeNorm", EdgeNorm},
                 {"edgeNormList", EdgeNormList},
                 {"scaleRows", ScaleRows},
                 {"randomInts", RandomInts},
                 {"randomNormal", RandomNormal},
                 {"randomUniform", RandomUniform},
                 {"fillF32", FillF32},
                 {"fillI32", FillI32},
                 {"addI32", AddI32},
                 {"streamWait", StreamWait},
                 {"scale", Scale},
                 {"axpy", Axpy},
                 {"gemmStridedBatched", GemmStridedBatched},
                 {"headsToBatch", HeadsToBatch},
                 {"batchToHeads", BatchToHeads},
                 {"causalSoftmax", CausalSoftmax},
                 {"causalSoftmaxBackward", CausalSoftmaxBackward},
                 {"layerNorm", LayerNorm},
                 {"layerNormBackward", LayerNormBackward},
                 {"gelu", Gelu},
                 {"geluBackward", GeluBackward},
                 {"embedding", Embedding},
                 {"embeddingBackward", EmbeddingBackward},
                 {"gemmBackend", GemmBackend},
                 {"bindStreamWorkspace", BindStreamWorkspace},
                 {"unbindStreamWorkspace", UnbindStreamWorkspace},
                 {"workspaceBytes", WorkspaceBytes},
                 {"unboundWorkspaceAllocations", UnboundWorkspaceAllocations}});
  exports.Set("ops", o);
}

}  // namespace gpumem::binding
